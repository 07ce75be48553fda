package server_test

import (
	"testing"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func (e *env) login(user, password string) resp {
	e.t.Helper()
	return e.do("POST", "/api/v1/auth/login", "", M{"username": user, "password": password}, nil)
}

func (e *env) token(user, password string) string {
	e.t.Helper()
	r := e.login(user, password)
	if r.Status != 200 {
		e.t.Fatalf("login %s: %d %s", user, r.Status, r.Body)
	}
	return r.JSON["token"].(string)
}

// TestProfile: PUT /me changes any subset of the signed-in user's own profile, checks each field and leaves the
// stored user untouched when one is bad; GET /me shows the result.
func TestProfile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		bob := e.token("bob", "pw-bob-123")
		r := e.do("PUT", "/api/v1/me", bob, M{"display_name": "  Bob 李  ", "language": "zh-CN", "email": "bob@example.com",
			"mobile": "+86 138-0000-0000", "im_id": "bob.li"}, nil)
		if r.Status != 200 || r.JSON["display_name"] != "Bob 李" || r.JSON["language"] != "zh-CN" || r.JSON["email"] != "bob@example.com" ||
			r.JSON["mobile"] != "+86 138-0000-0000" || r.JSON["im_id"] != "bob.li" || r.JSON["username"] != "bob" {
			t.Fatalf("PUT /me: %d %s", r.Status, r.Body)
		}
		// A subset leaves the rest alone.
		r = e.do("PUT", "/api/v1/me", bob, M{"language": "en"}, nil)
		if r.Status != 200 || r.JSON["language"] != "en" || r.JSON["display_name"] != "Bob 李" || r.JSON["email"] != "bob@example.com" {
			t.Fatalf("subset: %d %s", r.Status, r.Body)
		}
		if r = e.do("GET", "/api/v1/me", bob, nil, nil); r.JSON["language"] != "en" || r.JSON["im_id"] != "bob.li" || r.JSON["password_change_required"] != false {
			t.Fatalf("GET /me: %s", r.Body)
		}
		for _, c := range []struct {
			body M
			code string
		}{
			{M{"display_name": "   "}, "invalid_display_name"},
			{M{"display_name": string(make([]byte, 129))}, "invalid_display_name"},
			{M{"language": "fr"}, "invalid_language"},
			{M{"email": "not an address"}, "invalid_email"},
			{M{"email": "a@b"}, "invalid_email"},
			{M{"mobile": "call me"}, "invalid_mobile"},
			{M{"im_id": "a\nb"}, "invalid_im_id"},
		} {
			assertError(t, e.do("PUT", "/api/v1/me", bob, c.body, nil), 400, c.code)
		}
		assertError(t, e.do("PUT", "/api/v1/me", bob, M{"roles": []string{"admin"}}, nil), 400, "unknown_field")
		assertError(t, e.do("PUT", "/api/v1/me", bob, M{"disabled": true}, nil), 400, "unknown_field")
		u, _ := s.GetUser(ctx0, "default", "bob")
		if u.DisplayName != "Bob 李" || u.Language != "en" || u.Email != "bob@example.com" || len(u.Roles) != 0 || u.Disabled {
			t.Fatalf("refused updates changed the user: %+v", u)
		}
		// Clearing a field is an empty string.
		if r = e.do("PUT", "/api/v1/me", bob, M{"email": "", "language": ""}, nil); r.Status != 200 || r.JSON["email"] != "" || r.JSON["language"] != "" {
			t.Fatalf("clear: %d %s", r.Status, r.Body)
		}
		// An API token has no profile.
		tok := e.do("POST", "/api/v1/tokens", e.admin, M{"name": "erp", "roles": []string{"admin"}}, nil).JSON["token"].(string)
		assertError(t, e.do("PUT", "/api/v1/me", tok, M{"display_name": "x"}, nil), 403, "not_a_user")
		assertError(t, e.do("POST", "/api/v1/me/password", tok, M{"old_password": "x", "new_password": "long-enough"}, nil), 403, "not_a_user")
		assertError(t, e.do("PUT", "/api/v1/me", "", M{"display_name": "x"}, nil), 401, "")
	})
}

// TestPasswords: POST /me/password (204; 403 wrong_password; 422 weak_password) and the admin reset, after
// which the user must choose a new password at the next sign-in.
func TestPasswords(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		bob := e.token("bob", "pw-bob-123")
		assertError(t, e.do("POST", "/api/v1/me/password", bob, M{"old_password": "wrong-one", "new_password": "a-new-password"}, nil), 403, "wrong_password")
		assertError(t, e.do("POST", "/api/v1/me/password", bob, M{"old_password": "pw-bob-123", "new_password": "1234567"}, nil), 422, "weak_password")
		assertError(t, e.do("POST", "/api/v1/me/password", bob, M{"old_password": "pw-bob-123", "new_password": "pw-bob-123"}, nil), 422, "same_password")
		if e.login("bob", "pw-bob-123").Status != 200 {
			t.Fatal("a refused change must keep the old password")
		}
		if r := e.do("POST", "/api/v1/me/password", bob, M{"old_password": "pw-bob-123", "new_password": "bobs new password"}, nil); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("change: %d %s", r.Status, r.Body)
		}
		assertError(t, e.login("bob", "pw-bob-123"), 401, "invalid_credentials")
		// The change ended bob's sessions, the one that made it too: the UI signs in again with the new password.
		assertError(t, e.do("GET", "/api/v1/me", bob, nil, nil), 401, "token_revoked")
		if r := e.login("bob", "bobs new password"); r.Status != 200 || r.JSON["password_change_required"] != false {
			t.Fatalf("login with the new password: %d %s", r.Status, r.Body)
		}
		bob = e.token("bob", "bobs new password")

		// Admin reset: 204, the owner must change it; not for non-admins; the policy holds.
		assertError(t, e.do("POST", "/api/v1/users/bob/password", bob, M{"new_password": "from-bob-himself"}, nil), 403, "admin_required")
		assertError(t, e.do("POST", "/api/v1/users/bob/password", e.admin, M{"new_password": "short"}, nil), 422, "weak_password")
		assertError(t, e.do("POST", "/api/v1/users/ghost/password", e.admin, M{"new_password": "long-enough-1"}, nil), 404, "")
		assertError(t, e.do("POST", "/api/v1/users/bob/password", e.admin, M{"password": "long-enough-1"}, nil), 400, "unknown_field")
		if r := e.do("POST", "/api/v1/users/bob/password", e.admin, M{"new_password": "reset-by-admin"}, nil); r.Status != 204 {
			t.Fatalf("reset: %d %s", r.Status, r.Body)
		}
		assertError(t, e.login("bob", "bobs new password"), 401, "invalid_credentials")
		r := e.login("bob", "reset-by-admin")
		if r.Status != 200 || r.JSON["password_change_required"] != true || r.JSON["user"].(M)["password_change_required"] != true {
			t.Fatalf("after a reset the owner must change the password: %d %s", r.Status, r.Body)
		}
		bob = r.JSON["token"].(string)
		e.mkUser("carol")
		carol := e.token("carol", "pw-carol-123")
		if u := e.do("GET", "/api/v1/users/bob", carol, nil, nil); u.Status != 200 || u.JSON["password_change_required"] != nil {
			t.Fatalf("only admins and bob see that bob must change his password: %s", u.Body)
		}
		if u := e.do("GET", "/api/v1/users/bob", e.admin, nil, nil); u.JSON["password_change_required"] != true {
			t.Fatalf("admins see it: %s", u.Body)
		}
		if me := e.do("GET", "/api/v1/me", bob, nil, nil); me.JSON["password_change_required"] != true {
			t.Fatalf("GET /me must say so too (a reload keeps asking): %s", me.Body)
		}
		if r := e.do("POST", "/api/v1/me/password", bob, M{"old_password": "reset-by-admin", "new_password": "bob's own again"}, nil); r.Status != 204 {
			t.Fatalf("change after reset: %d %s", r.Status, r.Body)
		}
		bob = e.token("bob", "bob's own again")
		if me := e.do("GET", "/api/v1/me", bob, nil, nil); me.JSON["password_change_required"] != false {
			t.Fatalf("the change clears it: %s", me.Body)
		}
		// An admin resetting their own password is not asked again.
		if r := e.do("POST", "/api/v1/users/admin/password", e.admin, M{"new_password": "admin-pw-2"}, nil); r.Status != 204 {
			t.Fatalf("own reset: %d %s", r.Status, r.Body)
		}
		if r := e.login("admin", "admin-pw-2"); r.JSON["password_change_required"] != false {
			t.Fatalf("own reset: %s", r.Body)
		}
	})
}

// TestPatchUser: an admin edits any subset of a user's fields, each checked; the last enabled admin can neither
// be disabled nor lose the role; a disabled user cannot sign in and their tokens stop working at once on this
// server (for good: enabled again, they sign in again); a role given applies to existing tokens, a role taken
// away ends them.
func TestPatchUser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		e.mkUser("carol")
		e.mkUser("dave")
		if r := e.do("POST", "/api/v1/departments", e.admin, M{"name": "eng"}, nil); r.Status != 201 {
			t.Fatal(r.Status, string(r.Body))
		}
		r := e.do("PATCH", "/api/v1/users/bob", e.admin, M{"display_name": "Bob B", "department": "eng", "manager": "carol",
			"roles": []string{"ops", "dba", "ops"}, "email": "bob@example.com"}, nil)
		if r.Status != 200 || r.JSON["display_name"] != "Bob B" || r.JSON["department"] != "eng" || r.JSON["manager"] != "carol" ||
			len(r.JSON["roles"].([]any)) != 2 || r.JSON["roles"].([]any)[0] != "dba" || r.JSON["email"] != "bob@example.com" || r.JSON["disabled"] != false {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		if r = e.do("PATCH", "/api/v1/users/bob", e.admin, M{"roles": []string{}}, nil); r.Status != 200 || len(r.JSON["roles"].([]any)) != 0 || r.JSON["manager"] != "carol" {
			t.Fatalf("a subset: %d %s", r.Status, r.Body)
		}
		if r = e.do("PATCH", "/api/v1/users/bob", e.admin, M{"manager": "", "department": ""}, nil); r.Status != 200 || r.JSON["manager"] != "" || r.JSON["department"] != "" {
			t.Fatalf("clearing: %d %s", r.Status, r.Body)
		}
		e.do("PATCH", "/api/v1/users/carol", e.admin, M{"manager": "bob"}, nil)
		e.do("PATCH", "/api/v1/users/dave", e.admin, M{"manager": "carol"}, nil)
		before, _ := s.GetUser(ctx0, "default", "bob")
		for _, c := range []struct {
			body   M
			status int
			code   string
		}{
			{M{"display_name": ""}, 400, "invalid_display_name"},
			{M{"roles": []string{"Not A Role"}}, 400, "invalid_role"},
			{M{"department": "nowhere"}, 422, "unknown_department"},
			{M{"manager": "ghost"}, 422, "unknown_manager"},
			{M{"manager": "bob"}, 422, "manager_cycle"},
			{M{"manager": "dave"}, 422, "manager_cycle"}, // dave → carol → bob
			{M{"manager": "../x"}, 400, "invalid_manager"},
			{M{"email": "nope"}, 400, "invalid_email"},
			{M{"disabled": "yes"}, 400, "invalid_field"},
			{M{"password": "x"}, 400, "unknown_field"},
			{M{"username": "robert"}, 400, "unknown_field"},
		} {
			assertError(t, e.do("PATCH", "/api/v1/users/bob", e.admin, c.body, nil), c.status, c.code)
		}
		if after, _ := s.GetUser(ctx0, "default", "bob"); after.DisplayName != before.DisplayName || after.Manager != before.Manager ||
			after.Department != before.Department || len(after.Roles) != 0 || after.Email != before.Email || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("refused patches changed the user:\n%+v\n%+v", before, after)
		}
		assertError(t, e.do("PATCH", "/api/v1/users/ghost", e.admin, M{"display_name": "G"}, nil), 404, "")
		bob := e.token("bob", "pw-bob-123")
		assertError(t, e.do("PATCH", "/api/v1/users/carol", bob, M{"display_name": "C"}, nil), 403, "admin_required")

		// Roles are read from the store, not the token: bob made admin can manage at once. Demoted, his sessions
		// end (a role taken away bumps his token version); signed in again, he is not an admin.
		e.do("PATCH", "/api/v1/users/bob", e.admin, M{"roles": []string{"admin"}}, nil)
		if r := e.do("POST", "/api/v1/departments", bob, M{"name": "made-by-bob"}, nil); r.Status != 201 {
			t.Fatalf("bob made admin: %d %s", r.Status, r.Body)
		}
		e.do("PATCH", "/api/v1/users/bob", e.admin, M{"roles": []string{}}, nil)
		assertError(t, e.do("POST", "/api/v1/departments", bob, M{"name": "made-by-bob-2"}, nil), 401, "token_revoked")
		bob = e.token("bob", "pw-bob-123")
		assertError(t, e.do("POST", "/api/v1/departments", bob, M{"name": "made-by-bob-2"}, nil), 403, "admin_required")

		// Disabled: no sign-in, and the token bob holds stops working.
		if r := e.do("PATCH", "/api/v1/users/bob", e.admin, M{"disabled": true}, nil); r.Status != 200 || r.JSON["disabled"] != true {
			t.Fatalf("disable: %d %s", r.Status, r.Body)
		}
		assertError(t, e.login("bob", "pw-bob-123"), 403, "user_disabled")
		assertError(t, e.login("bob", "wrong-password"), 401, "invalid_credentials") // the state is told only to the password's owner
		assertError(t, e.do("GET", "/api/v1/me", bob, nil, nil), 401, "user_disabled")
		assertError(t, e.do("GET", "/api/v1/tasks", bob, nil, nil), 401, "user_disabled")
		if r := e.do("GET", "/api/v1/users", e.admin, nil, nil); r.Status != 200 {
			t.Fatal("the admin is not affected")
		}
		e.do("PATCH", "/api/v1/users/bob", e.admin, M{"disabled": false}, nil)
		assertError(t, e.do("GET", "/api/v1/me", bob, nil, nil), 401, "token_revoked") // disabling ended it for good
		if r := e.do("GET", "/api/v1/me", e.token("bob", "pw-bob-123"), nil, nil); r.Status != 200 {
			t.Fatalf("enabled again, bob signs in again: %d %s", r.Status, r.Body)
		}

		// The only enabled admin cannot disable or demote themselves.
		assertError(t, e.do("PATCH", "/api/v1/users/admin", e.admin, M{"disabled": true}, nil), 409, "last_admin")
		assertError(t, e.do("PATCH", "/api/v1/users/admin", e.admin, M{"roles": []string{"ops"}}, nil), 409, "last_admin")
		if u, _ := s.GetUser(ctx0, "default", "admin"); u.Disabled || !u.IsEnabledAdmin() {
			t.Fatalf("the last admin changed: %+v", u)
		}
		// With a second enabled admin they may; then that one is the last.
		e.do("PATCH", "/api/v1/users/carol", e.admin, M{"roles": []string{"admin"}}, nil)
		if r := e.do("PATCH", "/api/v1/users/admin", e.admin, M{"roles": []string{"ops"}}, nil); r.Status != 200 {
			t.Fatalf("de-admin with another admin: %d %s", r.Status, r.Body)
		}
		carol := e.token("carol", "pw-carol-123")
		assertError(t, e.do("PATCH", "/api/v1/users/carol", carol, M{"disabled": true}, nil), 409, "last_admin")
	})
}
