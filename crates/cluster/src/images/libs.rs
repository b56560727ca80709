//! The shared libraries a dynamically linked program loads, found the way
//! `ldd` finds them: by asking the program's own dynamic loader (its ELF
//! `PT_INTERP`) to list them with `--list`, which applies the loader's real
//! search rules (`RUNPATH`, `LD_LIBRARY_PATH`, `ld.so.cache`, default dirs)
//! without running the program.
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::read::elf::{FileHeader, ProgramHeader};
use object::{FileKind, ReadCache};

use super::ImageError;

/// The dynamic loader named in `exe`'s `PT_INTERP`, or `None` for a static
/// program.
pub fn interpreter(exe: &Path) -> Result<Option<PathBuf>, ImageError> {
    let elf_err = |detail: String| ImageError::Elf {
        path: exe.to_owned(),
        detail,
    };
    let file = File::open(exe).map_err(|e| elf_err(e.to_string()))?;
    // Reads only the pages the headers need, not the whole (large) binary.
    let data = ReadCache::new(file);
    let kind = FileKind::parse(&data).map_err(|e| elf_err(e.to_string()))?;
    let interp = match kind {
        FileKind::Elf64 => interp_of::<object::elf::FileHeader64<object::Endianness>>(&data),
        FileKind::Elf32 => interp_of::<object::elf::FileHeader32<object::Endianness>>(&data),
        other => return Err(elf_err(format!("not an ELF file ({other:?})"))),
    }
    .map_err(|e| elf_err(e.to_string()))?;
    Ok(interp.map(|bytes| {
        let bytes = bytes.strip_suffix(b"\0").unwrap_or(&bytes);
        PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
    }))
}

fn interp_of<H: FileHeader>(data: &ReadCache<File>) -> object::read::Result<Option<Vec<u8>>> {
    let header = H::parse(data)?;
    let endian = header.endian()?;
    for segment in header.program_headers(endian, data)? {
        if let Some(interp) = segment.interpreter(endian, data)? {
            return Ok(Some(interp.to_vec()));
        }
    }
    Ok(None)
}

/// Absolute paths of every shared object `exe` loads, its dynamic loader
/// included (at the path the kernel asks for). Empty for a static program.
pub fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let Some(loader) = interpreter(exe)? else {
        return Ok(Vec::new());
    };
    let command = format!("{} --list {}", loader.display(), exe.display());
    let listed = super::stdout_of(Command::new(&loader).arg("--list").arg(exe), command)?;
    let mut libs = parse_list(exe, &listed)?;
    if !libs.contains(&loader) {
        libs.push(loader);
    }
    Ok(libs)
}

/// Parses the loader's `--list` output (the format `ldd` prints):
///
/// ```text
///     linux-vdso.so.1 (0x00007ffd...)
///     libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f...)
///     /lib64/ld-linux-x86-64.so.2 (0x00007f...)
///     libmissing.so.1 => not found
/// ```
///
/// Objects without a file (the vDSO) are skipped; a library that was not
/// found is an error naming it.
pub fn parse_list(exe: &Path, text: &str) -> Result<Vec<PathBuf>, ImageError> {
    let mut libs: Vec<PathBuf> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, rest) = match line.split_once("=>") {
            Some((name, rest)) => (name.trim(), rest.trim()),
            None => (line, line),
        };
        if rest.starts_with("not found") {
            return Err(ImageError::MissingLibrary {
                exe: exe.to_owned(),
                library: name.to_owned(),
            });
        }
        let path = match rest.rsplit_once(" (0x") {
            Some((path, _)) => path.trim(),
            None => rest,
        };
        if path.starts_with('/') {
            let path = PathBuf::from(path);
            if !libs.contains(&path) {
                libs.push(path);
            }
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_list_keeps_files_and_skips_the_vdso() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd8a1f6000)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0e1c000000)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1be00000)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f0e1c1c0000)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1be00000)\n";
        let libs = parse_list(Path::new("/x"), text).unwrap();
        assert_eq!(
            libs,
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn parse_list_names_a_missing_library() {
        let err = parse_list(
            Path::new("/bin/prog"),
            "\tlibfoo.so.3 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/bin/prog"), "{msg}");
        assert!(msg.contains("libfoo.so.3"), "{msg}");
    }

    #[test]
    fn a_static_program_needs_nothing() {
        // busybox-static is a host requirement of real nodes.
        let busybox = Path::new("/bin/busybox");
        if !busybox.exists() {
            return;
        }
        assert_eq!(interpreter(busybox).unwrap(), None);
        assert!(shared_libraries(busybox).unwrap().is_empty());
    }

    #[test]
    fn the_test_binary_needs_libc_and_its_loader() {
        let exe = std::env::current_exe().unwrap();
        let loader = interpreter(&exe).unwrap().expect("tests link dynamically");
        let libs = shared_libraries(&exe).unwrap();
        assert!(libs.contains(&loader), "{libs:?}");
        assert!(
            libs.iter().any(|l| l
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libc."))),
            "{libs:?}"
        );
        assert!(
            libs.iter().all(|l| l.is_absolute() && l.exists()),
            "{libs:?}"
        );
    }

    #[test]
    fn a_non_elf_file_is_an_error_naming_it() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), "#!/bin/sh\n").unwrap();
        let msg = interpreter(tmp.path()).unwrap_err().to_string();
        assert!(msg.contains(&tmp.path().display().to_string()), "{msg}");
    }
}
