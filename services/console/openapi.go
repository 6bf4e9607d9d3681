package console

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI describes the REST API (OpenAPI 3.1). TestTheOpenAPIDocumentDescribesEveryRoute
// keeps it in step with the routes Register mounts and the statuses
// handleError can answer.
//
//go:embed openapi.json
var openAPI []byte

// apiDocument serves the OpenAPI document, to anyone: it holds no secret.
func (con *Console) apiDocument(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openAPI)
}
