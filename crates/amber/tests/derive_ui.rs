//! Compile-fail tests of `#[derive(Persistent)]`: each file in `tests/ui`
//! must fail to compile with exactly the errors in its `.stderr` file.
//! After changing a message, regenerate them with
//! `TRYBUILD=overwrite cargo test -p amber --test derive_ui` and review the
//! diff. The expected output depends on the compiler's wording, so a new Rust
//! release may need the same.

#[test]
fn derive_rejections() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
