/work/main/target-wt/release/deps/crc_catalog-d13e58ffe28d9018.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/poly.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/algorithm.rs

/work/main/target-wt/release/deps/libcrc_catalog-d13e58ffe28d9018.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/poly.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/algorithm.rs

/work/main/target-wt/release/deps/libcrc_catalog-d13e58ffe28d9018.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/poly.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/algorithm.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/poly.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crc-catalog-2.5.0/src/algorithm.rs:
