package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/condition"
	"github.com/halley-bpm/halley/service/template"
)

type draftRequest struct {
	Definition json.RawMessage `json:"definition"`
}

func (s *Server) createTemplate(c *gin.Context) {
	var req template.CreateRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var v *template.View
	err := s.record(c, model.AuditTemplateCreate, req.Key, func(ctx context.Context, _ *model.AuditEntry) (err error) {
		v, err = s.templates.Create(ctx, principal(c), req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, v)
}

func (s *Server) saveDraft(c *gin.Context) {
	var req draftRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Definition == nil {
		fail(c, model.CodedError(model.EINVALID, "invalid_definition", "definition is required"))
		return
	}
	var v *template.View
	err := s.record(c, model.AuditTemplateDraft, c.Param("key"), func(ctx context.Context, _ *model.AuditEntry) (err error) {
		v, err = s.templates.SaveDraft(ctx, principal(c), c.Param("key"), req.Definition)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) publish(c *gin.Context) {
	var v *model.TemplateVersion
	err := s.record(c, model.AuditTemplatePublish, c.Param("key"), func(ctx context.Context, _ *model.AuditEntry) (err error) {
		v, err = s.templates.Publish(ctx, principal(c), c.Param("key"))
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"key": v.Key, "version": v.Version, "published_at": v.PublishedAt, "published_by": v.PublishedBy})
}

func (s *Server) validateTemplate(c *gin.Context) {
	var req draftRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Definition == nil {
		fail(c, model.CodedError(model.EINVALID, "invalid_definition", "definition is required"))
		return
	}
	r, err := s.templates.ValidateFor(c.Request.Context(), principal(c).TenantID, req.Definition)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
}

func (s *Server) listTemplates(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	ts, next, err := s.templates.List(c.Request.Context(), principal(c).TenantID, pg)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, List[*template.View]{Items: ts, NextCursor: next})
}

func (s *Server) getTemplate(c *gin.Context) {
	v, err := s.templates.Get(c.Request.Context(), principal(c).TenantID, c.Param("key"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func versionParam(c *gin.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return 0, model.CodedError(model.EINVALID, "invalid_version", "version must be a positive whole number")
	}
	return n, nil
}

// readableTemplate refuses (404, as if it did not exist) a hidden template to whoever may not read it.
func (s *Server) readableTemplate(c *gin.Context, key string) error {
	p := principal(c)
	hidden, err := s.templates.Hidden(c.Request.Context(), p.TenantID, key)
	if err != nil || !hidden {
		return err
	}
	ok, err := s.engine.MayReadHidden(c.Request.Context(), p, key)
	if err == nil && !ok {
		err = model.CodedError(model.ENOTFOUND, "template_not_found", "template %q not found", key)
	}
	return err
}

func (s *Server) getVersion(c *gin.Context) {
	n, err := versionParam(c)
	if err != nil {
		fail(c, err)
		return
	}
	if err := s.readableTemplate(c, c.Param("key")); err != nil {
		fail(c, err)
		return
	}
	v, err := s.templates.GetVersion(c.Request.Context(), principal(c).TenantID, c.Param("key"), n)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) versionDiagram(c *gin.Context) {
	n, err := versionParam(c)
	if err != nil {
		fail(c, err)
		return
	}
	if err := s.readableTemplate(c, c.Param("key")); err != nil {
		fail(c, err)
		return
	}
	lang, err := diagramLang(c)
	if err != nil {
		fail(c, err)
		return
	}
	d, err := s.templates.Diagram(c.Request.Context(), principal(c).TenantID, c.Param("key"), n, nil, lang)
	if err != nil {
		fail(c, err)
		return
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(d))
}

// diagramLang reads a diagram's ?lang=: "" (absent or empty) for the plain names and texts every client gets, or one of
// model.Languages for the reader's (node names, readable conditions with the forms' labels, the edge words). Any
// other value is refused (400 invalid_language), as PUT /me refuses it, rather than silently drawn plain.
func diagramLang(c *gin.Context) (string, error) {
	lang := c.Query("lang")
	if lang == "" || slices.Contains(model.Languages, lang) {
		return lang, nil
	}
	return "", model.CodedError(model.EINVALID, "invalid_language", "lang must be one of %s, or absent for the plain diagram (got %q)",
		strings.Join(model.Languages, ", "), lang)
}

type evaluateRequest struct {
	Condition json.RawMessage `json:"condition"`
	Context   json.RawMessage `json:"context"`
}

// evaluateCondition is the designer's condition tester.
func (s *Server) evaluateCondition(c *gin.Context) {
	var req evaluateRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	doc := req.Context
	if len(doc) == 0 || string(doc) == "null" {
		doc = json.RawMessage("{}")
	}
	if doc[0] != '{' {
		fail(c, model.CodedError(model.EINVALID, "invalid_context", "context must be a JSON object"))
		return
	}
	ok, err := condition.Evaluate(req.Condition, doc)
	if err != nil {
		var ce *condition.CompileError
		if errors.As(err, &ce) {
			err = model.CodedError(model.EINVALID, "bad_condition", "%s", ce.Error())
		}
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"result": ok})
}
