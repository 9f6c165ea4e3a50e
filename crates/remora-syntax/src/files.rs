//! Reading the files a program names (its source, its imports, data files,
//! `read-file`) without hanging or exhausting memory, whatever they are:
//! only regular files are read (a FIFO would block, `/dev/zero` never
//! ends), and never more than a bound. Standard input, which may be either,
//! is read with the same bound.

use crate::diag::Diagnostic;
use crate::source::{SourceFile, SourceMap};
use crate::span::Span;
use std::io::Read;
use std::path::Path;

/// The most bytes a source file (a program or an import) may have.
pub const MAX_SOURCE_BYTES: u64 = 256 << 20;

/// The bytes of the regular file at `path`, at most `max` of them; an error
/// in words for anything else.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    if regular(path)?.len() > max {
        return Err(too_large(max));
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    read_at_most(file, max)
}

/// The metadata of `path` if it is a regular file (looked at without
/// opening it: opening a FIFO blocks); an error in words otherwise.
fn regular(path: &Path) -> Result<std::fs::Metadata, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.is_file() {
        Ok(meta)
    } else if meta.is_dir() {
        Err("is a directory, not a file".into())
    } else {
        Err("is not a regular file (a device, a pipe or a socket is not read)".into())
    }
}

/// The first `n` bytes of the regular file at `path` (fewer where it is
/// shorter).
pub fn read_prefix(path: &Path, n: u64) -> Result<Vec<u8>, String> {
    regular(path)?;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(|e| e.to_string())?
        .take(n)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// The text of the regular file at `path` (UTF-8), at most `max` bytes.
pub fn read_text(path: &Path, max: u64) -> Result<String, String> {
    utf8(read_bounded(path, max)?).map_err(|e| e.to_string())
}

/// Bytes that are not UTF-8 text: where the first bad byte is, and the
/// text with each bad sequence replaced by U+FFFD (the bytes before the
/// first unchanged), so that a diagnostic can show its line.
#[derive(Debug, Clone)]
pub struct NotUtf8 {
    pub text: String,
    pub offset: usize,
    pub byte: u8,
}

impl std::fmt::Display for NotUtf8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "is not UTF-8 text")
    }
}

impl std::error::Error for NotUtf8 {}

impl NotUtf8 {
    /// The error at the first bad byte of the text named `name` (which
    /// `sources` is given, replacements and all, to show the line).
    pub fn diagnostic(&self, sources: &mut SourceMap, name: &str) -> Diagnostic {
        let file = sources.add(SourceFile::new(name, None, self.text.clone()));
        let at = Span::new(
            file,
            self.offset,
            self.offset + char::REPLACEMENT_CHARACTER.len_utf8(),
        );
        Diagnostic::error(at, format!("not UTF-8 text: byte 0x{:02X}", self.byte))
    }
}

/// `bytes` as text, if they are UTF-8.
pub fn utf8(bytes: Vec<u8>) -> Result<String, NotUtf8> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        NotUtf8 {
            byte: bytes.get(offset).copied().unwrap_or_default(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
            offset,
        }
    })
}

/// Everything `r` gives, up to `max` bytes; an error past that (a stream
/// that does not end is refused once it has given `max`).
pub fn read_at_most(r: impl Read, max: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    r.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

fn too_large(max: u64) -> String {
    format!("is larger than the {max} bytes that may be read")
}

/// Writes `bytes` to `path` whole or not at all: into a new file beside it,
/// then renamed over it, so that a write that fails midway (a full disk, a
/// file-size limit) leaves the old file as it was and no partial one.
///
/// Only a regular file (or a path with nothing there yet) is replaced so;
/// a link is followed, and the file it names replaced. Anything else — a
/// device (`/dev/null`, `/dev/full`), a pipe, a terminal — is written to as
/// it is, never replaced by a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let target = match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
            return f.write_all(bytes).and_then(|()| f.flush());
        }
        // A regular file, perhaps through links: the file itself.
        Ok(_) => std::fs::canonicalize(path)?,
        // Nothing there (or a dangling link, which is left alone: the new
        // file is made where the link is).
        Err(_) => path.to_path_buf(),
    };
    replace_file(&target, 0o666, |f| f.write_all(bytes))
}

/// Makes the regular file `target` whole or not at all: `write` fills a
/// new file beside it (of mode `mode`, less the umask), which is synced
/// and then renamed over `target`. If anything fails, the new file is
/// removed and `target` is left as it was.
pub fn replace_file(
    target: &Path,
    mode: u32,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.partial", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temp)
        .and_then(|mut f| {
            write(&mut f)?;
            f.sync_all()
        });
    let renamed = written.and_then(|()| std::fs::rename(&temp, target));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    renamed
}

/// Writes `bytes` to standard output and flushes it. A reader that has
/// gone (`remora run … | head -1`) is not an error; anything else — a full
/// disk, a file-size limit, `/dev/full` — is, and must be reported.
pub fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// A path as an error message shows it: control characters escaped (a file
/// name may hold any byte but `/` and NUL), and at most 200 characters.
pub fn shown(path: &Path) -> String {
    crate::diag::printable_name(&path.to_string_lossy(), 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused_without_reading() {
        assert!(read_bounded(Path::new("/dev/zero"), 10).is_err());
        assert!(read_bounded(Path::new("/"), 10).is_err());
    }

    #[test]
    fn an_endless_stream_stops_at_the_bound() {
        let endless = std::io::repeat(0);
        assert!(read_at_most(endless, 1000).is_err());
        assert_eq!(read_at_most(&b"abc"[..], 3), Ok(b"abc".to_vec()));
    }
}
