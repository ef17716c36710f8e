/work/main/target-wt/release/deps/rustc_version-1391d7bdeeace60f.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs

/work/main/target-wt/release/deps/librustc_version-1391d7bdeeace60f.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs

/work/main/target-wt/release/deps/librustc_version-1391d7bdeeace60f.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs:
