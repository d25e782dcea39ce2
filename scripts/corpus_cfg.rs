//! Build script of the crates whose tests read the real-file corpus (casebook-formats,
//! casebook-runner, casebook-cli): it finds the corpus from one setting and tells the tests.
//!
//! The corpus is the folder named by `CASEBOOK_CORPUS` (relative to the workspace root when it is
//! relative), by default `../shared/corpus` beside the workspace. Its path reaches the tests as
//! `env!("CASEBOOK_CORPUS_DIR")`; when it is a folder, the tests are built with `--cfg corpus`,
//! and without it the tests that need it are ignored with the reason, so a clone without the
//! corpus passes and lists them as not run. Nothing is read from the corpus here.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(corpus)");
    println!("cargo::rerun-if-env-changed=CASEBOOK_CORPUS");
    // The crates sit two folders below the workspace root (`crates/NAME`).
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default()).join("../..");
    let folder = match std::env::var_os("CASEBOOK_CORPUS").filter(|v| !v.is_empty()) {
        // An absolute setting replaces the root when joined.
        Some(setting) => root.join(setting),
        None => root.join("../shared/corpus"),
    };
    println!("cargo::rustc-env=CASEBOOK_CORPUS_DIR={}", folder.display());
    if folder.is_dir() {
        println!("cargo::rustc-cfg=corpus");
    }
    // The corpus, or the nearest folder above it that exists (a path that does not exist would
    // rebuild on every run): a corpus added, moved or changed reruns this, and so does a build
    // of another checkout in the same target folder, whose watched path differs (cargo keys
    // this run by package, not by where the checkout is, so without a watched path a run made
    // for a clone without the corpus would be reused here).
    let watched = folder.ancestors().find(|p| p.is_dir()).unwrap_or(&root);
    println!("cargo::rerun-if-changed={}", watched.display());
}
