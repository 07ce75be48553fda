package server

import (
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/subscription"
)

// openapiSubscriptions documents event subscriptions (subscriptions.go).
var openapiSubscriptions = []apiOp{
	{Method: "POST", Path: apiBase + "/subscriptions", Tag: "subscriptions", Sum: "Subscribe a webhook or plugin to events", Auth: authAdmin,
		Body: subscription.CreateRequest{}, Status: 201, Resp: model.Subscription{}},
	{Method: "GET", Path: apiBase + "/subscriptions", Tag: "subscriptions", Sum: "List subscriptions", Auth: authAdmin, Query: []string{"cursor", "limit"},
		Resp: List[*model.Subscription]{}},
	{Method: "GET", Path: apiBase + "/subscriptions/:id", Tag: "subscriptions", Sum: "One subscription", Auth: authAdmin, Resp: model.Subscription{}},
	{Method: "DELETE", Path: apiBase + "/subscriptions/:id", Tag: "subscriptions", Sum: "Delete a subscription", Auth: authAdmin, Status: 204},
	{Method: "GET", Path: apiBase + "/subscriptions/:id/deliveries", Tag: "subscriptions", Sum: "The subscription's delivery log",
		Auth: authAdmin, Query: []string{"cursor", "limit"}, Resp: List[*model.Delivery]{}},
}
