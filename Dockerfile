# Halley: the web UI, the Go binary, and a small runtime with python3 for plugins.
FROM node:20-bookworm AS ui
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
# The build generates the definition types from the schema the Go types generate.
COPY model/definition.schema.json /src/model/definition.schema.json
RUN npm run build

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=ui /src/frontend/dist ./frontend/dist
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/halley ./server/cmd/halley

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* && useradd --system --home /var/lib/halley --create-home halley
COPY --from=build /out/halley /usr/local/bin/halley
USER halley
ENV HALLEY_ADDR=0.0.0.0:8080 HALLEY_DATA_DIR=/var/lib/halley
VOLUME /var/lib/halley
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/readyz').status==200 else 1)"
ENTRYPOINT ["halley"]
CMD ["serve"]
