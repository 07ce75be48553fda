package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/attachments"
)

// uploadAttachment is POST /attachments: a logged-in user's upload.
func (s *Server) uploadAttachment(c *gin.Context) {
	p := principal(c)
	s.upload(c, attachments.Uploader{TenantID: p.TenantID, Username: p.Username})
}

// uploadFormAttachment is POST /forms/{key}/attachments: an upload for the start form of key, by whoever may
// submit it (an anonymous submitter when the form allows them; the upload then serves that form only).
func (s *Server) uploadFormAttachment(c *gin.Context) {
	key := c.Param("key")
	p := principal(c)
	if _, err := s.triggers.Form(c.Request.Context(), key, p); err != nil {
		fail(c, err)
		return
	}
	u := attachments.Uploader{TenantID: model.DefaultTenant, FormKey: key}
	if p != nil {
		u.TenantID, u.Username = p.TenantID, p.Username
	} else if ok, _ := s.anonUploads.Allow(c.ClientIP(), time.Now()); !ok {
		fail(c, model.CodedError(model.ERATELIMITED, "rate_limited", "too many anonymous uploads from %s; retry in a minute", c.ClientIP()))
		return
	}
	s.upload(c, u)
}

// upload streams the multipart field "file" into the attachment service: nothing is held in memory and the
// size is checked while reading.
func (s *Server) upload(c *gin.Context, u attachments.Uploader) {
	mr, err := c.Request.MultipartReader()
	if err != nil {
		fail(c, model.CodedError(model.EINVALID, "missing_file", "send the file as the multipart/form-data field \"file\""))
		return
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				fail(c, model.CodedError(model.ETOOLARGE, "attachment_too_large", "the file is larger than %d bytes (%s)", s.attachments.MaxSize(), attachments.HumanSize(s.attachments.MaxSize())).
					WithDetails(map[string]any{"max_size": s.attachments.MaxSize()}))
				return
			}
			fail(c, model.CodedError(model.EINVALID, "missing_file", "send the file as the multipart/form-data field \"file\""))
			return
		}
		if part.FormName() != "file" {
			_, _ = io.Copy(io.Discard, part) // other fields are ignored
			continue
		}
		a, err := s.attachments.Upload(c.Request.Context(), u, part.FileName(), part)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusCreated, a)
		return
	}
}

// attachmentSettings is GET /attachments: what an upload form shows before a file is chosen.
func (s *Server) attachmentSettings(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"max_size": s.attachments.MaxSize()})
}

// getAttachment is GET /attachments/{id}: the file, to its uploader, admins and whoever may see an instance it is
// used in. It is never rendered as a page: risky types go out as application/octet-stream, everything but
// images, PDF, plain text and media as a download, with nosniff and a sandboxing CSP.
func (s *Server) getAttachment(c *gin.Context) {
	ctx := c.Request.Context()
	p := principal(c)
	a, err := s.attachments.Get(ctx, p.TenantID, c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	ok, err := s.attachments.MayRead(ctx, p, a, func(instanceID string) bool {
		_, err := s.engine.Get(ctx, p, instanceID)
		return err == nil
	})
	if err != nil {
		fail(c, err)
		return
	}
	if !ok {
		fail(c, model.CodedError(model.EFORBIDDEN, "not_allowed", "you may not read attachment %s", a.ID))
		return
	}
	etag := `"` + a.SHA256 + `"`
	h := c.Writer.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; sandbox")
	if match := c.GetHeader("If-None-Match"); match != "" && strings.Contains(match, etag) {
		c.Status(http.StatusNotModified)
		return
	}
	ct, disposition := a.ContentType, "inline"
	if attachments.Risky(ct) {
		ct = "application/octet-stream"
	}
	if !attachments.Inline(ct) || c.Query("download") == "1" {
		disposition = "attachment"
	}
	if ct == "text/plain" {
		ct = "text/plain; charset=utf-8"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": a.Name}))
	h.Set("Content-Length", strconv.FormatInt(a.Size, 10))
	c.Status(http.StatusOK)
	if c.Request.Method == http.MethodHead {
		return
	}
	if err := s.attachments.Write(ctx, a, c.Writer); err != nil {
		// The status is sent: the client sees a short body; the log says why.
		s.log.ErrorContext(ctx, "server: unable to send an attachment", "attachment", a.ID, "err", err)
	}
}

// checkAttachments verifies that the attachment ids the documents refer to may be used by p (or by an anonymous
// submitter of formKey) in the instance instanceID ("" for a new one), and returns them. Without an attachment
// service it returns nothing.
func (s *Server) checkAttachments(ctx context.Context, p *model.Principal, formKey, instanceID string, docs ...[]byte) ([]string, error) {
	if s.attachments == nil {
		return nil, nil
	}
	ids := attachments.Refs(docs...)
	if len(ids) == 0 {
		return nil, nil
	}
	u := attachments.Uploader{TenantID: tenantOf(p), FormKey: formKey}
	if p != nil {
		u.Username = p.Username
	}
	return ids, s.attachments.CheckUse(ctx, u, instanceID, ids)
}

// linkAttachments records that ids are used in the instance. The instance is stored already: a failure is logged
// (the attachments stay readable by their uploaders, and would be purged as unused) rather than answered.
func (s *Server) linkAttachments(ctx context.Context, tenant, instanceID string, ids []string) {
	if s.attachments == nil || len(ids) == 0 {
		return
	}
	if err := s.attachments.Link(ctx, tenant, instanceID, ids); err != nil {
		s.log.ErrorContext(ctx, "server: unable to link attachments to their instance", "instance_id", instanceID, "attachments", fmt.Sprint(ids), "err", err)
	}
}

func isAttachmentUpload(c *gin.Context) bool {
	if c.Request.Method != http.MethodPost {
		return false
	}
	p := strings.TrimSuffix(c.FullPath(), "/")
	return p == "/api/v1/attachments" || p == "/api/v1/forms/:key/attachments"
}

// tenantOf is p's tenant, the default tenant for an anonymous submitter.
func tenantOf(p *model.Principal) string {
	if p == nil {
		return model.DefaultTenant
	}
	return p.TenantID
}
