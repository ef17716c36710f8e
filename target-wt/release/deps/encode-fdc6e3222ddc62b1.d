/work/main/target-wt/release/deps/encode-fdc6e3222ddc62b1.d: core/benches/encode.rs core/benches/support/mod.rs

/work/main/target-wt/release/deps/encode-fdc6e3222ddc62b1: core/benches/encode.rs core/benches/support/mod.rs

core/benches/encode.rs:
core/benches/support/mod.rs:
