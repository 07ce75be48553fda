package server

import "github.com/halley-bpm/halley/model"

// openapiAttachments documents uploaded files (attachments.go).
var openapiAttachments = []apiOp{
	{Method: "GET", Path: apiBase + "/attachments", Tag: "attachments", Sum: "The upload limit (HALLEY_ATTACHMENT_MAX_SIZE)", Auth: authUser,
		Resp: attachmentSettingsDoc{}},
	{Method: "POST", Path: apiBase + "/attachments", Tag: "attachments", Sum: "Upload a file (multipart: file)",
		Desc: "413 attachment_too_large beyond the limit.", Auth: authUser, RawBody: "multipart/form-data", Status: 201, Resp: model.Attachment{}},
	{Method: "POST", Path: apiBase + "/forms/:key/attachments", Tag: "attachments", Sum: "Upload a file for a start form's submission (multipart: file)",
		Desc: "Anonymous when the form allows anonymous submitters; the upload then serves that form's submission only.", Auth: authOptional,
		RawBody: "multipart/form-data", Status: 201, Resp: model.Attachment{}},
	{Method: "GET", Path: apiBase + "/attachments/:id", Tag: "attachments", Sum: "Download a file",
		Desc: "To its uploader, admins and whoever may see a request that uses it (403 otherwise).", Auth: authUser, RespType: "application/octet-stream"},
	{Method: "HEAD", Path: apiBase + "/attachments/:id", Tag: "attachments", Sum: "A file's headers", Auth: authUser, RespType: "application/octet-stream"},
}

type attachmentSettingsDoc struct {
	MaxSize int64 `json:"max_size"`
}
