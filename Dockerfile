# The usher image: the Go build, then a Debian runtime with what the
# sandboxed Asymptote backends need (asy, TeX, bubblewrap, Xvfb).
# Build: make image. Run: docs/deploy.md (the sandbox needs a seccomp
# profile that lets bubblewrap create its namespaces: deploy/seccomp-usher.json).
#
# The base images are arguments so that a machine without a registry can
# give its own (the image test builds them from Debian's packages).
ARG GO_IMAGE=golang:1.26-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# Only the Go packages of the binary, so that a change elsewhere (docs,
# the web app's sources, compose.yaml) keeps the build cached.
COPY cmd ./cmd
COPY client ./client
COPY jobtype ./jobtype
COPY internal ./internal
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" -o /out/usher ./cmd/usher

FROM ${DEBIAN_IMAGE}
# No manuals, documentation or translations (about 150 MB of TeX's and
# the libraries'); the copyright files stay.
RUN printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
      'path-exclude /usr/share/locale/*' > /etc/dpkg/dpkg.cfg.d/usher-slim
# The same packages as scripts/deps.sh's sandboxed backend: asy, the
# sandbox, svg (dvisvgm), pdf and png (ghostscript), 3D (xvfb, and
# repstopdf from texlive-font-utils), and the TeX a user expects in a
# label (texlive-fonts-recommended: Times and the other PostScript fonts;
# texlive-latex-extra: packages such as ocgx2); tini reaps the sandboxes' orphans
# and passes signals, so that a stop lets running tasks finish.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      asymptote bubblewrap dvisvgm ghostscript xvfb texlive-font-utils \
      texlive-fonts-recommended texlive-latex-extra \
      ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
# usher runs as its own user: the sandboxes then run as that user too,
# in user namespaces of their own (docs/sandbox.md).
RUN groupadd --system --gid 10001 usher \
 && useradd --system --uid 10001 --gid usher --home-dir /var/lib/usher \
      --create-home --shell /usr/sbin/nologin usher
COPY --from=build /out/usher /usr/local/bin/usher
USER usher
WORKDIR /var/lib/usher
VOLUME /var/lib/usher
ENV USHER_SERVE_DATA=/var/lib/usher/usher.db
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/usher"]
CMD ["serve"]
