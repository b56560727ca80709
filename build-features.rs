//! The runner package's build script: embeds every `.feature` file under
//! `features/` into the runner (`src/runner/feature_source.rs` reads the
//! list), so that an installed runner carries the suite's scenarios and runs
//! them from any directory, with no checkout beside it.
//!
//! The list is written on every change under `features/`: what a binary runs
//! by default is always what its checkout held when it was built.
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let top = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").ok_or("no CARGO_MANIFEST_DIR")?);
    let dir = top.join("features");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files = Vec::new();
    collect(&dir, &mut files)?;
    files.sort();
    let mut out = String::from("&[\n");
    for file in &files {
        let shown = file
            .strip_prefix(&top)?
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        out.push_str(&format!(
            "    ({shown:?}, include_str!({:?})),\n",
            file.display().to_string()
        ));
    }
    out.push_str("]\n");
    let target = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("no OUT_DIR")?);
    std::fs::write(target.join("features.rs"), out)?;
    Ok(())
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "feature") {
            files.push(path);
        }
    }
    Ok(())
}
