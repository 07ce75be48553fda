package server

import (
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
)

// openapiPeople documents sign-in, the profile, users, tokens and departments (identity.go).
var openapiPeople = []apiOp{
	{Method: "POST", Path: apiBase + "/auth/login", Tag: "people", Sum: "Sign in: a session token",
		Desc: "429 with Retry-After after 5 failed attempts for one username or 20 from one IP within 15 minutes.", Auth: authPublic,
		Body: loginRequest{}, Resp: loginResponse{}},
	{Method: "GET", Path: apiBase + "/me", Tag: "people", Sum: "Who I am", Auth: authUser, Resp: meResponse{}},
	{Method: "PUT", Path: apiBase + "/me", Tag: "people", Sum: "Change my profile (any subset)", Auth: authUser, Body: identity.ProfileUpdate{}, Resp: meResponse{}},
	{Method: "POST", Path: apiBase + "/me/password", Tag: "people", Sum: "Change my password",
		Desc: "403 wrong_password; 422 weak_password (under 8 characters).", Auth: authUser, Body: passwordRequest{}, Status: 204},
	{Method: "GET", Path: apiBase + "/users", Tag: "people", Sum: "List users", Auth: authUser, Query: []string{"role", "cursor", "limit"},
		Resp: List[*model.User]{}},
	{Method: "GET", Path: apiBase + "/users/:username", Tag: "people", Sum: "One user", Auth: authUser, Resp: model.User{}},
	{Method: "POST", Path: apiBase + "/users", Tag: "people", Sum: "Create a user", Desc: "422 weak_password.", Auth: authAdmin,
		Body: identity.CreateUserRequest{}, Status: 201, Resp: model.User{}},
	{Method: "PATCH", Path: apiBase + "/users/:username", Tag: "people", Sum: "Change a user (any subset); a disabled user cannot sign in",
		Auth: authAdmin, Body: identity.UserPatch{}, Resp: model.User{}},
	{Method: "DELETE", Path: apiBase + "/users/:username", Tag: "people", Sum: "Delete a user; history keeps the name", Auth: authAdmin, Status: 204},
	{Method: "POST", Path: apiBase + "/users/:username/password", Tag: "people", Sum: "Reset a user's password", Auth: authAdmin,
		Body: resetPasswordRequest{}, Status: 204},
	{Method: "POST", Path: apiBase + "/tokens", Tag: "people", Sum: "Create an API token (its secret is shown once)", Auth: authAdmin,
		Body: identity.TokenRequest{}, Status: 201, Resp: tokenResponse{}},
	{Method: "GET", Path: apiBase + "/tokens", Tag: "people", Sum: "List API tokens", Auth: authAdmin, Query: []string{"cursor", "limit"},
		Resp: List[*model.APIToken]{}},
	{Method: "DELETE", Path: apiBase + "/tokens/:id", Tag: "people", Sum: "Delete an API token; it stops working at once", Auth: authAdmin, Status: 204},
	{Method: "GET", Path: apiBase + "/departments", Tag: "people", Sum: "List departments", Auth: authUser, Resp: List[*model.Department]{}},
	{Method: "POST", Path: apiBase + "/departments", Tag: "people", Sum: "Create a department", Auth: authAdmin, Body: departmentRequest{},
		Status: 201, Resp: model.Department{}},
}
