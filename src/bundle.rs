//! `remora build FILE -o PROGRAM`: a standalone executable, made of a copy
//! of the `remora` executable with a *payload* appended: the program's
//! source (every file it imports, as read when it was built), the entry it
//! runs, and the program compiled to C, built then.
//!
//! At start-up `remora` reads the last [`TRAILER`] bytes of its own
//! executable; where they end with [`MAGIC`] it is such a program, and it
//! runs the payload as `remora run --engine compiled` runs a file.
//!
//! The trailer: the payload's offset, its length and its checksum
//! (FNV-1a, 64 bits), each 8 bytes little-endian, then [`MAGIC`]. The
//! payload: a sequence of byte strings, each its length (8 bytes) then
//! its bytes, in [`Payload::encode`]'s order.

use std::cell::RefCell;
use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The last bytes of a built program's trailer.
pub const MAGIC: &[u8; 16] = b"remora-program\x00\x01";

/// The trailer's length: offset, length, checksum, magic.
pub const TRAILER: usize = 8 * 3 + MAGIC.len();

/// What a built program carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    /// The program's path as given to `remora build` (its diagnostics
    /// name it so).
    pub path: PathBuf,
    /// The entry it runs.
    pub entry: String,
    /// What `PROGRAM --help` says it is.
    pub about: String,
    /// The program compiled (the C compiler's executable), or `None`: it
    /// runs on the interpreter (`remora build --engine interp`).
    pub exe: Option<Vec<u8>>,
    /// Every file read when the program was loaded: its canonical path and
    /// its text.
    pub files: Vec<(PathBuf, String)>,
    /// Every path the loader resolved, and the canonical path it gave.
    pub resolved: Vec<(PathBuf, PathBuf)>,
}

/// The payload format's version (the first string).
const VERSION: &[u8] = b"1";

impl Payload {
    /// The payload's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |bytes: &[u8]| {
            out.extend((bytes.len() as u64).to_le_bytes());
            out.extend(bytes);
        };
        put(VERSION);
        put(self.path.as_os_str().as_bytes());
        put(self.entry.as_bytes());
        put(self.about.as_bytes());
        match &self.exe {
            Some(exe) => {
                put(b"compiled");
                put(exe);
            }
            None => put(b"interp"),
        }
        put(self.files.len().to_string().as_bytes());
        for (path, text) in &self.files {
            put(path.as_os_str().as_bytes());
            put(text.as_bytes());
        }
        put(self.resolved.len().to_string().as_bytes());
        for (asked, canonical) in &self.resolved {
            put(asked.as_os_str().as_bytes());
            put(canonical.as_os_str().as_bytes());
        }
        out
    }

    /// The payload of `bytes`, or what is wrong with them.
    pub fn decode(bytes: &[u8]) -> Result<Payload, String> {
        let mut rest = bytes;
        let mut take = || -> Result<&[u8], String> {
            let (len, after) = rest.split_at_checked(8).ok_or("it ends early")?;
            let len = u64::from_le_bytes(len.try_into().map_err(|_| "it ends early")?);
            let len = usize::try_from(len).map_err(|_| "a length is too large")?;
            let (field, after) = after.split_at_checked(len).ok_or("it ends early")?;
            rest = after;
            Ok(field)
        };
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "a text is not UTF-8".to_string());
        let path = |b: &[u8]| PathBuf::from(OsString::from_vec(b.to_vec()));
        if take()? != VERSION {
            return Err("it was written by another version of remora".into());
        }
        let mut p = Payload {
            path: path(take()?),
            entry: text(take()?)?,
            about: text(take()?)?,
            ..Payload::default()
        };
        p.exe = match take()? {
            b"compiled" => Some(take()?.to_vec()),
            b"interp" => None,
            _ => return Err("its engine is unknown".into()),
        };
        let count = |b: &[u8]| -> Result<usize, String> {
            text(b)?
                .parse()
                .map_err(|_| "a count is not a number".to_string())
        };
        for _ in 0..count(take()?)? {
            let file = path(take()?);
            p.files.push((file, text(take()?)?));
        }
        for _ in 0..count(take()?)? {
            let asked = path(take()?);
            p.resolved.push((asked, path(take()?)));
        }
        if !rest.is_empty() {
            return Err("it has bytes after its last field".into());
        }
        Ok(p)
    }
}

/// The trailer of a payload of `len` bytes at `offset` with `checksum`.
fn trailer(offset: u64, len: u64, checksum: u64) -> Vec<u8> {
    let mut t = Vec::with_capacity(TRAILER);
    t.extend(offset.to_le_bytes());
    t.extend(len.to_le_bytes());
    t.extend(checksum.to_le_bytes());
    t.extend(MAGIC);
    t
}

/// Where a file's payload lies, if it ends with a trailer: its offset, its
/// length and its checksum (unchecked).
fn find(file: &mut std::fs::File) -> std::io::Result<Option<(u64, u64, u64)>> {
    let size = file.metadata()?.len();
    if size < TRAILER as u64 {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(size - TRAILER as u64))?;
    let mut t = [0u8; TRAILER];
    file.read_exact(&mut t)?;
    if &t[24..] != MAGIC {
        return Ok(None);
    }
    let word = |k: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&t[k * 8..k * 8 + 8]);
        u64::from_le_bytes(w)
    };
    let (offset, len, checksum) = (word(0), word(1), word(2));
    if offset
        .checked_add(len)
        .and_then(|end| end.checked_add(TRAILER as u64))
        != Some(size)
    {
        return Err(std::io::Error::other("its trailer does not match its size"));
    }
    Ok(Some((offset, len, checksum)))
}

/// The payload this executable carries, if it is a built program (only
/// its last bytes are read when it is not).
pub fn embedded() -> Result<Option<Payload>, String> {
    let Ok(exe) = std::env::current_exe() else {
        return Ok(None);
    };
    let Ok(mut file) = std::fs::File::open(&exe) else {
        return Ok(None);
    };
    let damaged = |m: String| format!("the program embedded in {} is damaged: {m}", exe.display());
    let Some((offset, len, checksum)) = find(&mut file).map_err(|e| damaged(e.to_string()))? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.take(len).read_to_end(&mut bytes))
        .map_err(|e| damaged(e.to_string()))?;
    if crate::native::fnv(&[&bytes]) != checksum {
        return Err(damaged("its checksum does not match".into()));
    }
    Payload::decode(&bytes).map(Some).map_err(damaged)
}

/// Writes `program`: the executable `base` (without any payload it
/// carries) and `payload`, whole or not at all (a temporary file beside
/// it, renamed), mode 0755 less the umask.
pub fn write_program(program: &Path, base: &Path, payload: &Payload) -> std::io::Result<()> {
    let mut source = std::fs::File::open(base)?;
    let prefix = match find(&mut source)? {
        Some((offset, _, _)) => offset,
        None => source.metadata()?.len(),
    };
    source.seek(SeekFrom::Start(0))?;
    let body = payload.encode();
    remora_syntax::files::replace_file(program, 0o755, |f| {
        let copied = std::io::copy(&mut (&mut source).take(prefix), f)?;
        if copied != prefix {
            return Err(std::io::Error::other(
                "the remora executable changed while it was copied",
            ));
        }
        f.write_all(&body)?;
        f.write_all(&trailer(prefix, body.len() as u64, crate::native::fnv(&[&body])))
    })
}

/// The embedded executable `exe` in the compile cache (written once, by
/// its hash, atomically, mode 0755): its path.
pub fn extract(exe: &[u8]) -> std::io::Result<PathBuf> {
    let dir = crate::native::cache_dir();
    let key = crate::native::fnv(&[b"built", exe]);
    let path = dir.join(format!("built-{key:016x}"));
    if std::fs::read(&path).is_ok_and(|b| b == exe) {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir)?;
    remora_syntax::files::replace_file(&path, 0o755, |f| f.write_all(exe))?;
    Ok(path)
}

/// The real file system, each path resolved and each file read noted
/// (what `remora build` embeds).
#[derive(Default)]
pub struct Recording {
    pub files: RefCell<Vec<(PathBuf, String)>>,
    pub resolved: RefCell<Vec<(PathBuf, PathBuf)>>,
}

impl remora_syntax::load::FileLoader for Recording {
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        let c = remora_syntax::RealFs.canonicalize(path)?;
        self.resolved.borrow_mut().push((path.to_path_buf(), c.clone()));
        Ok(c)
    }
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        let text = remora_syntax::RealFs.read_to_string(path)?;
        self.files.borrow_mut().push((path.to_path_buf(), text.clone()));
        Ok(text)
    }
}

/// The files a built program carries, as its loader sees them: nothing
/// else is read.
pub struct Embedded<'a>(pub &'a Payload);

impl remora_syntax::load::FileLoader for Embedded<'_> {
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.0
            .resolved
            .iter()
            .find(|(asked, _)| asked == path)
            .map(|(_, c)| c.clone())
            .ok_or_else(|| not_embedded(path))
    }
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        self.0
            .files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| not_embedded(path))
    }
}

fn not_embedded(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{} is not embedded in this program", path.display()),
    )
}
