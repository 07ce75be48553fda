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
# prlimit (util-linux), true (coreutils) and sh (dash) come with the base image: the plugin sandbox uses them.
RUN apt-get update && apt-get install -y --no-install-recommends python3 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* && useradd --system --home /var/lib/halley --create-home halley
COPY --from=build /out/halley /usr/local/bin/halley
# Halley runs as halley, not root. The plugin sandbox runs each plugin as a uid of its own (61000...), hands it its
# work dir and kills what it leaves: the capabilities for that are *permitted* on the binary, not effective, and
# Halley raises one only on the thread that needs it. Missing ones (--cap-drop ALL, no-new-privileges) do not stop
# Halley from starting: it runs plugins in the weaker mode docs/security.md describes. cap_sys_admin is only used
# when the container is given it (--cap-add SYS_ADMIN), for plugins uploaded with network=off.
RUN apt-get update && apt-get install -y --no-install-recommends libcap2-bin \
    && setcap cap_setuid,cap_setgid,cap_chown,cap_kill,cap_sys_admin=p /usr/local/bin/halley \
    && apt-get purge -y libcap2-bin && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
USER halley
ENV HALLEY_ADDR=0.0.0.0:8080 HALLEY_DATA_DIR=/var/lib/halley
VOLUME /var/lib/halley
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/readyz').status==200 else 1)"
ENTRYPOINT ["halley"]
CMD ["serve"]
