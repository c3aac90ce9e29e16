# capstan's container image: built in a full Rust image, run on distroless (no shell, no
# package manager), as the non-root user 65532.
#
#   docker build -t capstan:dev .
#   docker run --rm capstan:dev --help

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# --no-default-features: the production binary carries no lab (no simulator, no gRPC server).
RUN cargo build --release --locked -p capstan --no-default-features --bin capstan \
 && mkdir -p /out/usr/local/bin \
 && cp target/release/capstan /out/usr/local/bin/capstan \
 # The shared libraries capstan links beyond glibc (OpenSSL for libgit2's HTTPS, zlib...),
 # copied with their paths so the distroless image needs no package manager.
 && ldd target/release/capstan | awk '/=> \// {print $3}' \
      | grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s)\.so' \
      | xargs -r -I{} cp --parents {} /out

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/capstan"]
CMD ["run", "--help"]
