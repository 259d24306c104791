//! `include/ringtrace.h` is generated from this crate by cbindgen, with
//! `include-trailer.h` (the typed-event macros and their inline helpers, which cbindgen
//! cannot generate) appended: this test regenerates it and fails if the committed
//! header differs. `RINGTRACE_BLESS=1` rewrites it.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    config.trailer = Some(std::fs::read_to_string(dir.join("include-trailer.h")).expect("include-trailer.h"));
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("the header is UTF-8");
    let path = dir.join("include/ringtrace.h");
    if std::env::var_os("RINGTRACE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &fresh).expect("writing include/ringtrace.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/ringtrace.h is out of date with the Rust sources: regenerate it with \
         `RINGTRACE_BLESS=1 cargo test -p ringtrace-ffi --test header` and commit it"
    );
}

#[test]
fn header_has_no_rust_types() {
    let header = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/ringtrace.h")).unwrap();
    for rust in ["Option<", "Box<", "Vec<", "usize", "&mut", "RingBuf", "AnyRing", "c_int"] {
        assert!(!header.contains(rust), "the header mentions the Rust type {rust}");
    }
}
