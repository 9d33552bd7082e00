# syntax=docker/dockerfile:1
# Container images of Strata for machines with Docker (BuildKit):
#
#   docker build --target strata-node     -t strata-node:0.1.0 .
#   docker build --target strata-operator -t strata-operator:0.1.0 .
#
# Both are static binaries FROM scratch, running as uid 65532 with no shell. Without Docker,
# scripts/build-images.sh builds the same images as docker-archive tarballs.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    triple="$(uname -m)-unknown-linux-gnu" \
 && RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$triple" \
      -p strata-node --bin strata-node -p strata-operator --bin strata-operator \
 && mkdir -p /out \
 && cp "target/$triple/release/strata-node" "target/$triple/release/strata-operator" /out/

FROM scratch AS strata-node
COPY --from=build /out/strata-node /strata-node
USER 65532:65532
EXPOSE 6379 9121
ENTRYPOINT ["/strata-node"]
CMD ["--bind", "0.0.0.0"]

FROM scratch AS strata-operator
COPY --from=build /out/strata-operator /strata-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/strata-operator"]
