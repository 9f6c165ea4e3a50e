//! Hostile input: the release binary, run under resource limits, keeps its
//! contract on every input — the right answer (exit 0 and the expected
//! output), or a clean error (exit 1 with `error:` on stderr, 2 for
//! command-line misuse) — and never a signal, a panic, an allocation abort,
//! a timeout or a damaged output file.
//!
//! Each case runs as
//! `sh -c 'ulimit -v V; ulimit -s S; ulimit -f F; exec timeout -s KILL T "$0" "$@"' remora ARGS…`
//! in a fresh temporary directory (defaults: 4000000 KB of address space,
//! a 1024 KB stack, no file-size limit, 20 s).
//!
//! Two kinds of case:
//!
//! * Files `tests/hostile/<class>/<name>.rem`. (Not `.remora`: every
//!   `.remora` file under `tests/` is a test-block case of `tests/suite.rs`,
//!   run in-process, and these programs are the ones that must not be run
//!   that way.) The file is the program, copied into the temporary
//!   directory as `<name>.remora` (or where `place:` says); its leading
//!   comment lines carry directives `;; key: value` (below).
//! * Generated cases ([`generated`]): inputs too large to keep in the
//!   repository (deep nesting, huge programs, large `.npy` files, FIFOs),
//!   made by the functions at the end of this file, with the same fields.
//!
//! Directives (values take the escapes `\n \t \r \e \0 \\ \xNN`):
//!
//! | key | meaning |
//! |---|---|
//! | `args:` | the command line after the binary, split at blanks (default `run {file}`); `{file}` is the program's path, `{dir}` the temporary directory, `\x20` a blank inside an argument |
//! | `exit:` | required: the exit status, `0`, `1` or `2`, or alternatives such as `0\|1` (the right answer or a clean error: where the answer needs more memory than the limit allows, either is the contract) |
//! | `stdout:` | the exact standard output, less its final newline (empty: none); with alternatives in `exit:`, checked only on exit 0 |
//! | `stdout-contains:` `stdout-not:` | a substring that must (not) occur in standard output (repeatable) |
//! | `stderr:` (= `stderr-contains:`) `stderr-not:` | the same for standard error (checked only on a non-zero exit when `exit:` has alternatives) |
//! | `output-contains:` | a substring of standard output or standard error |
//! | `stdout-max:` `stderr-max:` | the most bytes the stream may have |
//! | `stdin:` | text for standard input (default: /dev/null) |
//! | `stdin-file:` | standard input from this file (`{dir}` substituted) |
//! | `stdout-to:` | standard output to this file instead of the harness (e.g. /dev/full) |
//! | `limits:` | overrides: `-v KB -s KB -f BLOCKS -t SECONDS` (`unlimited` allowed but for -t) |
//! | `place:` | where the program is written, relative to `{dir}` (default `<name>.remora`; escapes allowed) |
//! | `file:` | `NAME TEXT`: a file made in `{dir}` before the run |
//! | `fifo:` | `NAME`: a named pipe made in `{dir}` |
//! | `dir:` | `NAME`: a directory made in `{dir}` |
//! | `symlink:` | `NAME TARGET` |
//! | `after-file:` | `NAME TEXT`: after the run, NAME holds exactly TEXT (an output that failed must leave the old file intact) |
//! | `after-prefix:` | `NAME TEXT`: after the run, NAME starts with TEXT |
//! | `no-file:` | `NAME`: after the run, NAME does not exist |
//! | `heavy:` | `yes`: uses much memory; runs while no other heavy case runs |
//! | `test-failure:` | `yes`: a `remora test` run whose test fails: exit 1 with the report (`… failed`) on stdout stands for `error:` on stderr |
//! | `pending:` | why the case does not keep its contract yet (a known bug): run and reported, not a failure (generated cases: [`GENERATED_PENDING`]) |
//!
//! Always checked, besides the directives: the process was not killed by a
//! signal (nor by the time limit), stderr holds neither `panicked` nor
//! `memory allocation of`, and on exit 1 stderr holds `error:` (but see
//! `test-failure:`).
//!
//! `REMORA_HOSTILE_BIN=PATH` runs another binary instead of building the
//! release one; `REMORA_HOSTILE_FILTER=TEXT` runs only the cases whose name
//! contains TEXT; `REMORA_HOSTILE_VERBOSE=1` prints every case's outcome.

use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Instant;

/// How much of standard output and standard error is kept for checking.
const KEEP_STDOUT: usize = 8 << 20;
const KEEP_STDERR: usize = 1 << 20;

// ---------------------------------------------------------------------------
// Cases

#[derive(Clone, Debug)]
enum Setup {
    /// A file with these bytes.
    Bytes(Vec<u8>),
    /// A file of `len` bytes: `head`, then zeros (a sparse file: it takes
    /// no room on the disk).
    Sparse { head: Vec<u8>, len: u64 },
    /// A named pipe.
    Fifo,
    /// A symbolic link to this target (`{dir}` substituted).
    Symlink(String),
    /// A directory.
    Dir,
}

#[derive(Clone, Debug)]
enum After {
    /// The file holds exactly these bytes.
    Is(String, Vec<u8>),
    /// The file starts with these bytes.
    Prefix(String, Vec<u8>),
    /// The file does not exist.
    Absent(String),
}

#[derive(Clone, Debug)]
enum Input {
    Null,
    Bytes(Vec<u8>),
    File(String),
}

#[derive(Clone, Debug)]
struct Limits {
    memory: String,
    stack: String,
    file_size: String,
    seconds: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory: "4000000".into(),
            stack: "1024".into(),
            file_size: "unlimited".into(),
            seconds: 20,
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    /// `class/name`.
    name: String,
    program: Vec<u8>,
    /// Where the program goes, relative to the temporary directory.
    place: PathBuf,
    /// The command line after the binary, unsubstituted.
    args: Vec<Vec<u8>>,
    stdin: Input,
    stdout_to: Option<String>,
    exit: Vec<i32>,
    stdout: Option<Vec<u8>>,
    stdout_contains: Vec<Vec<u8>>,
    stdout_not: Vec<Vec<u8>>,
    stderr_contains: Vec<Vec<u8>>,
    stderr_not: Vec<Vec<u8>>,
    output_contains: Vec<Vec<u8>>,
    stdout_max: Option<usize>,
    stderr_max: Option<usize>,
    limits: Limits,
    setup: Vec<(String, Setup)>,
    after: Vec<After>,
    heavy: bool,
    /// `remora test` reporting a test that failed: exit 1 with the report
    /// on standard output (`… failed`), not an `error:` on stderr.
    test_failure: bool,
    pending: Option<String>,
}

impl Case {
    fn new(name: &str, program: impl Into<Vec<u8>>, exit: &[i32]) -> Case {
        let stem = name.rsplit('/').next().unwrap_or(name);
        Case {
            name: name.to_string(),
            program: program.into(),
            place: PathBuf::from(format!("{stem}.remora")),
            args: vec![b"run".to_vec(), b"{file}".to_vec()],
            stdin: Input::Null,
            stdout_to: None,
            exit: exit.to_vec(),
            stdout: None,
            stdout_contains: Vec::new(),
            stdout_not: Vec::new(),
            stderr_contains: Vec::new(),
            stderr_not: Vec::new(),
            output_contains: Vec::new(),
            stdout_max: None,
            stderr_max: None,
            limits: Limits::default(),
            setup: Vec::new(),
            after: Vec::new(),
            heavy: false,
            test_failure: false,
            pending: None,
        }
    }

    fn args(mut self, args: &[&str]) -> Case {
        self.args = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self
    }

    fn stdout(mut self, text: impl Into<Vec<u8>>) -> Case {
        self.stdout = Some(text.into());
        self
    }

    fn stderr(mut self, text: &str) -> Case {
        self.stderr_contains.push(text.as_bytes().to_vec());
        self
    }

    fn stderr_not(mut self, text: &str) -> Case {
        self.stderr_not.push(text.as_bytes().to_vec());
        self
    }

    fn stderr_max(mut self, n: usize) -> Case {
        self.stderr_max = Some(n);
        self
    }

    fn time(mut self, seconds: u64) -> Case {
        self.limits.seconds = seconds;
        self
    }

    fn memory(mut self, kb: &str) -> Case {
        self.limits.memory = kb.to_string();
        self
    }

    fn file(mut self, name: &str, setup: Setup) -> Case {
        self.setup.push((name.to_string(), setup));
        self
    }

    fn stdin_file(mut self, path: &str) -> Case {
        self.stdin = Input::File(path.to_string());
        self
    }

    fn heavy(mut self) -> Case {
        self.heavy = true;
        self
    }
}

/// The text of a directive's value with its escapes resolved.
fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let next = bytes.get(i + 1).copied();
        i += 2;
        match next {
            Some(b'n') => out.push(b'\n'),
            Some(b't') => out.push(b'\t'),
            Some(b'r') => out.push(b'\r'),
            Some(b'e') => out.push(0x1b),
            Some(b'0') => out.push(0),
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex = text
                    .get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad \\x escape in {text:?}"))?;
                out.push(hex);
                i += 2;
            }
            _ => return Err(format!("bad escape in {text:?}")),
        }
    }
    Ok(out)
}

/// `NAME REST`: the first word and the rest (after one blank).
fn name_and_rest(value: &str) -> (String, &str) {
    match value.split_once(' ') {
        Some((name, rest)) => (name.to_string(), rest),
        None => (value.to_string(), ""),
    }
}

/// A case file's directives, read from its leading comment lines.
fn parse_case(name: &str, bytes: &[u8]) -> Result<Case, String> {
    let mut case = Case::new(name, bytes.to_vec(), &[]);
    let text = String::from_utf8_lossy(bytes);
    let mut saw_exit = false;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if !line.starts_with(';') {
            break;
        }
        // `;; key: value` is a directive; other comment lines (`; text`) are
        // the case's description.
        let Some(body) = line.strip_prefix(";; ") else {
            continue;
        };
        let Some((key, value)) = body.split_once(':') else {
            continue;
        };
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
            continue;
        }
        let value = value.strip_prefix(' ').unwrap_or(value);
        let bytes = || unescape(value);
        match key {
            "args" => {
                case.args = value
                    .split_ascii_whitespace()
                    .map(unescape)
                    .collect::<Result<_, _>>()?;
            }
            "stdin" => case.stdin = Input::Bytes(bytes()?),
            "stdin-file" => case.stdin = Input::File(value.to_string()),
            "stdout-to" => case.stdout_to = Some(value.to_string()),
            "exit" => {
                saw_exit = true;
                case.exit = value
                    .split('|')
                    .map(|c| {
                        c.trim()
                            .parse::<i32>()
                            .map_err(|e| format!("exit: {value:?}: {e}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "stdout" => case.stdout = Some(bytes()?),
            "stdout-contains" => case.stdout_contains.push(bytes()?),
            "stdout-not" => case.stdout_not.push(bytes()?),
            "stderr" | "stderr-contains" => case.stderr_contains.push(bytes()?),
            "stderr-not" => case.stderr_not.push(bytes()?),
            "output-contains" => case.output_contains.push(bytes()?),
            "stdout-max" => case.stdout_max = Some(value.trim().parse().map_err(|e| format!("{key}: {e}"))?),
            "stderr-max" => case.stderr_max = Some(value.trim().parse().map_err(|e| format!("{key}: {e}"))?),
            "limits" => {
                let words: Vec<&str> = value.split_ascii_whitespace().collect();
                for pair in words.chunks(2) {
                    let [flag, n] = pair else {
                        return Err(format!("limits: {value:?}"));
                    };
                    let n = n.to_string();
                    match *flag {
                        "-v" => case.limits.memory = n,
                        "-s" => case.limits.stack = n,
                        "-f" => case.limits.file_size = n,
                        "-t" => case.limits.seconds = n.parse().map_err(|e| format!("limits -t: {e}"))?,
                        _ => return Err(format!("limits: unknown {flag}")),
                    }
                }
            }
            "place" => case.place = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes()?)),
            "file" => {
                let (name, rest) = name_and_rest(value);
                case.setup.push((name, Setup::Bytes(unescape(rest)?)));
            }
            "fifo" => case.setup.push((value.to_string(), Setup::Fifo)),
            "dir" => case.setup.push((value.to_string(), Setup::Dir)),
            "symlink" => {
                let (name, rest) = name_and_rest(value);
                case.setup.push((name, Setup::Symlink(rest.to_string())));
            }
            "after-file" => {
                let (name, rest) = name_and_rest(value);
                case.after.push(After::Is(name, unescape(rest)?));
            }
            "after-prefix" => {
                let (name, rest) = name_and_rest(value);
                case.after.push(After::Prefix(name, unescape(rest)?));
            }
            "no-file" => case.after.push(After::Absent(value.to_string())),
            "heavy" => case.heavy = value.trim() == "yes",
            "test-failure" => case.test_failure = value.trim() == "yes",
            "pending" => case.pending = Some(value.to_string()),
            other => return Err(format!("unknown directive `{other}:`")),
        }
    }
    if !saw_exit || case.exit.is_empty() {
        return Err("no `;; exit:` directive".into());
    }
    Ok(case)
}

// ---------------------------------------------------------------------------
// Running

/// The release binary, built once (or `REMORA_HOSTILE_BIN`).
fn binary() -> Result<PathBuf, String> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("REMORA_HOSTILE_BIN") {
            return Ok(PathBuf::from(bin));
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "--release", "--locked", "--bin", "remora"])
            .current_dir(root)
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo build --release failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let target = match std::env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => root.join(dir),
            None => root.join("target"),
        };
        let bin = target.join("release").join("remora");
        if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!("no binary at {}", bin.display()))
        }
    })
    .clone()
}

/// What a run did.
struct Ran {
    code: Option<i32>,
    signal: Option<i32>,
    seconds: f64,
    stdout: Vec<u8>,
    stdout_len: usize,
    stderr: Vec<u8>,
    stderr_len: usize,
}

/// Reads a pipe to its end, keeping the first `keep` bytes and counting all.
fn drain(mut pipe: impl Read, keep: usize) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut total = 0;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n;
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, total)
}

fn substitute(arg: &[u8], file: &Path, dir: &Path) -> std::ffi::OsString {
    let mut out = Vec::new();
    let mut rest = arg;
    while !rest.is_empty() {
        if rest.starts_with(b"{file}") {
            out.extend_from_slice(file.as_os_str().as_bytes());
            rest = &rest[6..];
        } else if rest.starts_with(b"{dir}") {
            out.extend_from_slice(dir.as_os_str().as_bytes());
            rest = &rest[5..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    std::ffi::OsStr::from_bytes(&out).to_os_string()
}

fn substitute_str(text: &str, file: &Path, dir: &Path) -> PathBuf {
    PathBuf::from(substitute(text.as_bytes(), file, dir))
}

/// Makes the files a case asks for in `dir`.
fn set_up(case: &Case, dir: &Path, file: &Path) -> Result<(), String> {
    let parent = |p: &Path| -> Result<(), String> {
        match p.parent() {
            Some(d) => std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display())),
            None => Ok(()),
        }
    };
    parent(file)?;
    std::fs::write(file, &case.program).map_err(|e| format!("{}: {e}", file.display()))?;
    for (name, setup) in &case.setup {
        let path = dir.join(name);
        parent(&path)?;
        let made = match setup {
            Setup::Bytes(b) => std::fs::write(&path, b).map_err(|e| e.to_string()),
            Setup::Sparse { head, len } => std::fs::File::create(&path)
                .and_then(|mut f| {
                    f.write_all(head)?;
                    f.set_len(*len)
                })
                .map_err(|e| e.to_string()),
            Setup::Fifo => Command::new("mkfifo")
                .arg(&path)
                .status()
                .map_err(|e| e.to_string())
                .and_then(|s| {
                    if s.success() {
                        Ok(())
                    } else {
                        Err(format!("mkfifo: {s}"))
                    }
                }),
            Setup::Symlink(target) => std::os::unix::fs::symlink(substitute_str(target, file, dir), &path)
                .map_err(|e| e.to_string()),
            Setup::Dir => std::fs::create_dir_all(&path).map_err(|e| e.to_string()),
        };
        made.map_err(|e| format!("setting up {name}: {e}"))?;
    }
    Ok(())
}

/// Runs one case in a fresh directory under `root`.
fn execute(bin: &Path, case: &Case, root: &Path) -> Result<(Ran, Vec<String>), String> {
    let dir = root.join("work");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join(&case.place);
    set_up(case, &dir, &file)?;
    let stdin = match &case.stdin {
        Input::Null => Stdio::null(),
        Input::Bytes(b) => {
            let path = root.join("stdin");
            std::fs::write(&path, b).map_err(|e| format!("stdin: {e}"))?;
            Stdio::from(std::fs::File::open(&path).map_err(|e| format!("stdin: {e}"))?)
        }
        Input::File(p) => {
            let path = substitute_str(p, &file, &dir);
            Stdio::from(std::fs::File::open(&path).map_err(|e| format!("stdin {}: {e}", path.display()))?)
        }
    };
    let stdout = match &case.stdout_to {
        None => Stdio::piped(),
        Some(p) => {
            let path = substitute_str(p, &file, &dir);
            Stdio::from(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&path)
                    .map_err(|e| format!("stdout {}: {e}", path.display()))?,
            )
        }
    };
    let l = &case.limits;
    let script = format!(
        "ulimit -v {}; ulimit -s {}; ulimit -f {}; exec timeout -s KILL {} \"$0\" \"$@\"",
        l.memory, l.stack, l.file_size, l.seconds
    );
    let start = Instant::now();
    let mut child = Command::new("sh")
        .env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"))
        .arg("-c")
        .arg(script)
        .arg(bin)
        .args(case.args.iter().map(|a| substitute(a, &file, &dir)))
        .current_dir(&dir)
        .env_remove("REMORA_VERBOSE")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let out_pipe = child.stdout.take();
    let err_pipe = child.stderr.take();
    let (out, err) = std::thread::scope(|s| {
        let out = s.spawn(move || match out_pipe {
            Some(p) => drain(p, KEEP_STDOUT),
            None => (Vec::new(), 0),
        });
        let err = s.spawn(move || match err_pipe {
            Some(p) => drain(p, KEEP_STDERR),
            None => (Vec::new(), 0),
        });
        (out.join(), err.join())
    });
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let (stdout, stdout_len) = out.unwrap_or_default();
    let (stderr, stderr_len) = err.unwrap_or_default();
    let mut after = Vec::new();
    for a in &case.after {
        match a {
            After::Is(name, want) => match std::fs::read(dir.join(name)) {
                Ok(got) if &got == want => {}
                Ok(got) => after.push(format!(
                    "{name} holds {} bytes {:?}…, expected {:?}",
                    got.len(),
                    shown(&got, 80),
                    shown(want, 80)
                )),
                Err(e) => after.push(format!("{name}: {e}")),
            },
            After::Prefix(name, want) => match std::fs::read(dir.join(name)) {
                Ok(got) if got.starts_with(want) => {}
                Ok(got) => after.push(format!(
                    "{name} starts {:?}, expected {:?}",
                    shown(&got, 80),
                    shown(want, 80)
                )),
                Err(e) => after.push(format!("{name}: {e}")),
            },
            After::Absent(name) => {
                if std::fs::symlink_metadata(dir.join(name)).is_ok() {
                    after.push(format!("{name} exists"));
                }
            }
        }
    }
    Ok((
        Ran {
            code: status.code(),
            signal: status.signal(),
            seconds,
            stdout,
            stdout_len,
            stderr,
            stderr_len,
        },
        after,
    ))
}

fn shown(bytes: &[u8], n: usize) -> String {
    let cut = &bytes[..bytes.len().min(n)];
    String::from_utf8_lossy(cut).escape_debug().to_string()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Everything wrong with a run, by the case's contract.
fn judge(case: &Case, ran: &Ran, after: Vec<String>) -> Vec<String> {
    let mut wrong = Vec::new();
    let limit = case.limits.seconds as f64;
    match (ran.code, ran.signal) {
        (_, Some(9)) if ran.seconds >= limit - 0.5 => wrong.push(format!("timed out after {limit} s")),
        (_, Some(sig)) => wrong.push(format!("killed by signal {sig}")),
        (Some(c), _) if c >= 124 => wrong.push(format!("exit {c} (killed, or timeout failed)")),
        _ => {}
    }
    if contains(&ran.stderr, b"panicked") {
        wrong.push("a panic".into());
    }
    if contains(&ran.stderr, b"memory allocation of") {
        wrong.push("an allocation abort".into());
    }
    let code = ran.code.unwrap_or(-1);
    if code == 1 && case.test_failure {
        if !contains(&ran.stdout, b" failed") {
            wrong.push("exit 1 without a test report (`… failed`) on stdout".into());
        }
    } else if code == 1 && !contains(&ran.stderr, b"error:") {
        wrong.push("exit 1 without `error:` on stderr".into());
    }
    if !case.exit.contains(&code) {
        let want: Vec<String> = case.exit.iter().map(|c| c.to_string()).collect();
        wrong.push(format!("exit {code}, expected {}", want.join(" or ")));
    }
    let alternatives = case.exit.len() > 1;
    if let Some(want) = &case.stdout
        && (!alternatives || code == 0)
    {
        let got = ran.stdout.strip_suffix(b"\n").unwrap_or(&ran.stdout);
        if got != want.as_slice() || ran.stdout_len != ran.stdout.len() {
            wrong.push(format!(
                "stdout ({} bytes) {:?}, expected {:?}",
                ran.stdout_len,
                shown(&ran.stdout, 200),
                shown(want, 200)
            ));
        }
    }
    for s in &case.stdout_contains {
        if !contains(&ran.stdout, s) {
            wrong.push(format!("stdout lacks {:?}", shown(s, 100)));
        }
    }
    for s in &case.stdout_not {
        if contains(&ran.stdout, s) {
            wrong.push(format!("stdout holds {:?}", shown(s, 100)));
        }
    }
    if !alternatives || code != 0 {
        for s in &case.stderr_contains {
            if !contains(&ran.stderr, s) {
                wrong.push(format!("stderr lacks {:?}", shown(s, 100)));
            }
        }
    }
    for s in &case.stderr_not {
        if contains(&ran.stderr, s) {
            wrong.push(format!("stderr holds {:?}", shown(s, 100)));
        }
    }
    for s in &case.output_contains {
        if !contains(&ran.stdout, s) && !contains(&ran.stderr, s) {
            wrong.push(format!("neither stdout nor stderr holds {:?}", shown(s, 100)));
        }
    }
    if let Some(max) = case.stdout_max
        && ran.stdout_len > max
    {
        wrong.push(format!("stdout has {} bytes (at most {max})", ran.stdout_len));
    }
    if let Some(max) = case.stderr_max
        && ran.stderr_len > max
    {
        wrong.push(format!("stderr has {} bytes (at most {max})", ran.stderr_len));
    }
    wrong.extend(after);
    wrong
}

/// One case's result.
struct Outcome {
    name: String,
    pending: Option<String>,
    wrong: Vec<String>,
    report: String,
}

static SERIAL: AtomicUsize = AtomicUsize::new(0);
/// Held while a heavy case runs: at most one at a time.
static HEAVY: Mutex<()> = Mutex::new(());
/// Cases running now, in both tests together, and the signal that one ended.
static RUNNING: Mutex<usize> = Mutex::new(0);
static ENDED: Condvar = Condvar::new();

/// How many cases run at once: a few, whatever the number of cores (the
/// time limits assume the machine is not crowded).
fn slots() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 4)
}

/// A place among the cases running now, given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Slot {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        while *running >= slots() {
            running = ENDED.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        *running += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        *running = running.saturating_sub(1);
        ENDED.notify_one();
    }
}

fn run_one(bin: &Path, case: &Case) -> Outcome {
    let root = std::env::temp_dir().join(format!(
        "remora-hostile-{}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&root);
    let _heavy = if case.heavy {
        Some(HEAVY.lock().unwrap_or_else(|e| e.into_inner()))
    } else {
        None
    };
    let _slot = Slot::take();
    let result = execute(bin, case, &root);
    let _ = std::fs::remove_dir_all(&root);
    let (wrong, report) = match result {
        Err(e) => (vec![format!("harness: {e}")], String::new()),
        Ok((ran, after)) => {
            let wrong = judge(case, &ran, after);
            let status = match (ran.code, ran.signal) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(s)) => format!("signal {s}"),
                (None, None) => "no status".into(),
            };
            let report = format!(
                "{status} in {:.2} s; stdout {} bytes {:?}; stderr {} bytes {:?}",
                ran.seconds,
                ran.stdout_len,
                shown(&ran.stdout, 120),
                ran.stderr_len,
                shown(&ran.stderr, 300)
            );
            (wrong, report)
        }
    };
    Outcome {
        name: case.name.clone(),
        pending: case.pending.clone(),
        wrong,
        report,
    }
}

/// A case by name, made when it runs (generated inputs can be large).
struct Make {
    name: String,
    case: Box<dyn FnOnce() -> Result<Case, String> + Send>,
}

/// A generated case: `f` makes it, named `name` (pending if
/// [`GENERATED_PENDING`] names it).
fn make(name: &str, f: impl FnOnce(&str) -> Case + Send + 'static) -> Make {
    let owned = name.to_string();
    Make {
        name: owned.clone(),
        case: Box::new(move || {
            let mut case = f(&owned);
            if let Some((_, why)) = GENERATED_PENDING.iter().find(|(n, _)| *n == owned) {
                case.pending = Some(why.to_string());
            }
            Ok(case)
        }),
    }
}

/// Runs the cases a few at a time; prints the summary; fails on any case
/// that breaks its contract and is not pending.
fn run_all(title: &str, cases: Vec<Make>) {
    let bin = binary();
    assert!(bin.is_ok(), "{}", bin.as_ref().err().map_or("", |e| e.as_str()));
    let Ok(bin) = bin else { return };
    let filter = std::env::var("REMORA_HOSTILE_FILTER").unwrap_or_default();
    let verbose = std::env::var_os("REMORA_HOSTILE_VERBOSE").is_some_and(|v| v != "0");
    let queue = Mutex::new(cases);
    let results = Mutex::new(Vec::new());
    let threads = slots();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(Make { name, case }) = next else { break };
                    if !name.contains(&filter) {
                        continue;
                    }
                    let outcome = match case() {
                        Ok(case) => run_one(&bin, &case),
                        Err(e) => Outcome {
                            name,
                            pending: None,
                            wrong: vec![format!("harness: {e}")],
                            report: String::new(),
                        },
                    };
                    results.lock().unwrap_or_else(|e| e.into_inner()).push(outcome);
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text = String::new();
    let mut failures = Vec::new();
    let (mut passed, mut pending) = (0, Vec::new());
    for r in &results {
        let ok = r.wrong.is_empty();
        if verbose {
            let tag = match (ok, r.pending.is_some()) {
                (true, false) => "ok",
                (true, true) => "ok (pending)",
                (false, true) => "PENDING",
                (false, false) => "FAIL",
            };
            text.push_str(&format!("  {tag:12} {}: {}\n", r.name, r.report));
            for w in &r.wrong {
                text.push_str(&format!("               - {w}\n"));
            }
        }
        match (ok, &r.pending) {
            (true, None) => passed += 1,
            (true, Some(why)) => {
                passed += 1;
                text.push_str(&format!(
                    "note: pending case {} now keeps its contract (was: {why}); remove its `pending:`\n",
                    r.name
                ));
            }
            (false, Some(_)) => pending.push(r.name.clone()),
            (false, None) => failures.push(format!("{}: {}\n    {}", r.name, r.wrong.join("; "), r.report)),
        }
    }
    text.push_str(&format!(
        "hostile {title}: {} cases, {passed} passed, {} pending ({}), {} failed\n",
        results.len(),
        pending.len(),
        pending.join(", "),
        failures.len()
    ));
    // Straight to the file descriptor, past the test harness's capture, so
    // that the summary shows in every `cargo test` run.
    let _ = std::io::stderr().write_all(text.as_bytes());
    assert!(
        failures.is_empty(),
        "{} hostile case(s) broke their contract:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------
// The file cases

fn case_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            case_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rem") {
            out.push(path);
        }
    }
}

#[test]
fn hostile_case_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile");
    let mut files = Vec::new();
    case_files(&root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no cases under {}", root.display());
    let cases = files
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .with_extension("")
                .display()
                .to_string();
            Make {
                name: name.clone(),
                case: Box::new(move || {
                    let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
                    parse_case(&name, &bytes)
                }),
            }
        })
        .collect();
    run_all("files", cases);
}

// ---------------------------------------------------------------------------
// Generated cases

/// `open` `depth` times, then `leaf`, then `close` `depth` times.
fn nested(depth: usize, open: &str, leaf: &str, close: &str) -> String {
    let mut s = String::with_capacity(depth * (open.len() + close.len()) + leaf.len() + 1);
    for _ in 0..depth {
        s.push_str(open);
    }
    s.push_str(leaf);
    for _ in 0..depth {
        s.push_str(close);
    }
    s.push('\n');
    s
}

/// A `.npy` file's header (version 1, padded to 64 bytes).
fn npy_header(descr: &str, fortran: bool, shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let fortran = if fortran { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// A `.npy` file of zeros (sparse on disk) with this header.
fn npy_zeros(descr: &str, fortran: bool, shape: &[u64], item: u64) -> Setup {
    let head = npy_header(descr, fortran, shape);
    let len = head.len() as u64 + shape.iter().product::<u64>() * item;
    Setup::Sparse { head, len }
}

#[test]
fn hostile_generated() {
    run_all("generated", generated());
}

/// `(+ 1 (+ 1 … 0))`, `depth` deep: evaluates to `depth`.
fn adds(depth: usize) -> String {
    nested(depth, "(+ 1 ", "0", ")")
}

/// `[[…1…]]`, `depth` deep, as a program and as it prints.
fn vector(depth: usize) -> String {
    nested(depth, "[", "1", "]")
}

fn printed_vector(depth: usize) -> String {
    vector(depth).trim_end().to_string()
}

/// A program whose value has `rank` axes of one, made at run time (inside
/// a box: a type may have at most 64 axes, a value made at run time more).
fn runtime_ones(rank: usize) -> String {
    format!("(iota (+ 1 (* 0 (range {rank}))))\n")
}

/// How `runtime_ones(rank)` prints.
fn printed_runtime_ones(rank: usize) -> String {
    format!(
        "(box [{}] {}0{})",
        vec!["1"; rank].join(", "),
        "[".repeat(rank),
        "]".repeat(rank)
    )
}

/// The error for a type of more than 64 axes.
const TOO_MANY_AXES: &str = "arrays have at most 64 axes";

/// `[Int 1 1 … 1]` with `rank` ones.
fn ones_type(rank: usize) -> String {
    format!("[Int{}]", " 1".repeat(rank))
}

fn stack_cases() -> Vec<Make> {
    const DEEP: usize = 100_000;
    const MID: usize = 30_000;
    vec![
        make("stack/add-100k-run", |n| {
            Case::new(n, adds(DEEP), &[0, 1]).stdout(DEEP.to_string())
        }),
        make("stack/add-100k-run-stack-256k", |n| {
            let mut c = Case::new(n, adds(DEEP), &[0, 1]).stdout(DEEP.to_string());
            c.limits.stack = "256".into();
            c
        }),
        make("stack/add-30k-run-memory-400m", |n| {
            Case::new(n, adds(MID), &[0, 1])
                .stdout(MID.to_string())
                .memory("400000")
        }),
        make("stack/add-100k-run-memory-200m-stack-256k", |n| {
            let mut c = Case::new(n, adds(DEEP), &[0, 1])
                .stdout(DEEP.to_string())
                .memory("200000");
            c.limits.stack = "256".into();
            c
        }),
        make("stack/add-30k-parse", |n| {
            let text = adds(MID);
            let printed = text.trim_end().to_string();
            Case::new(n, text, &[0])
                .args(&["parse", "{file}"])
                .stdout(printed)
        }),
        make("stack/add-30k-check", |n| {
            Case::new(n, adds(MID), &[0])
                .args(&["check", "{file}"])
                .stdout("Int")
        }),
        make("stack/add-30k-elaborate", |n| {
            let text = adds(MID);
            let printed = text.trim_end().to_string();
            Case::new(n, text, &[0])
                .args(&["elaborate", "{file}"])
                .stdout(printed)
        }),
        make("stack/add-30k-interpret", |n| {
            Case::new(n, adds(MID), &[0])
                .args(&["interpret", "{file}"])
                .stdout(MID.to_string())
        }),
        make("stack/add-20k-check-expression", |n| {
            // A command-line argument holds at most 128 KiB.
            let text = adds(20_000);
            let mut c = Case::new(n, "", &[0]).stdout("Int");
            c.args = vec![
                b"check".to_vec(),
                b"-e".to_vec(),
                text.trim_end().as_bytes().to_vec(),
            ];
            c
        }),
        // A vector literal nested deeper than a type's 64 axes: an error,
        // found in time linear in its size.
        make("stack/vector-30k-run", |n| {
            Case::new(n, vector(MID), &[1]).stderr(TOO_MANY_AXES)
        }),
        make("stack/vector-30k-check", |n| {
            Case::new(n, vector(MID), &[1])
                .args(&["check", "{file}"])
                .stderr(TOO_MANY_AXES)
        }),
        make("stack/vector-30k-elaborate", |n| {
            Case::new(n, vector(MID), &[1])
                .args(&["elaborate", "{file}"])
                .stderr(TOO_MANY_AXES)
        }),
        make("stack/vector-64-run", |n| {
            Case::new(n, vector(64), &[0]).stdout(printed_vector(64))
        }),
        make("stack/vector-64-check", |n| {
            Case::new(n, vector(64), &[0])
                .args(&["check", "{file}"])
                .stdout(ones_type(64))
        }),
        make("stack/vector-65-run", |n| {
            Case::new(n, vector(65), &[1]).stderr(TOO_MANY_AXES)
        }),
        // Values of many axes made at run time print and are written out.
        make("stack/runtime-rank-30k-run", |n| {
            Case::new(n, runtime_ones(MID), &[0]).stdout(printed_runtime_ones(MID))
        }),
        make("stack/runtime-rank-30k-futhark-output", |n| {
            Case::new(n, runtime_ones(MID), &[0])
                .args(&["run", "--format", "futhark", "{file}"])
                .stdout(format!("{}0i64{}", "[".repeat(MID), "]".repeat(MID)))
        }),
        make("stack/vector-30k-npy-output", |n| {
            let mut c = Case::new(n, vector(MID), &[0, 1]).args(&["run", "{file}", "--output", "out.npy"]);
            c.stdout = Some(Vec::new());
            c
        }),
        // Each level's type holds its shape: past 64 axes, an error (the
        // types of 100,000 levels would hold 5·10^9 axes in all).
        make("stack/frame-100k-run", |n| {
            Case::new(n, nested(DEEP, "(frame [1] ", "1", ")"), &[1]).stderr(TOO_MANY_AXES)
        }),
        make("stack/frame-100k-check", |n| {
            Case::new(n, nested(DEEP, "(frame [1] ", "1", ")"), &[1])
                .args(&["check", "{file}"])
                .stderr(TOO_MANY_AXES)
        }),
        make("stack/frame-64-run", |n| {
            Case::new(n, nested(64, "(frame [1] ", "1", ")"), &[0]).stdout(printed_vector(64))
        }),
        make("stack/let-30k-run", |n| {
            Case::new(n, nested(MID, "(let ((val x 1)) ", "x", ")"), &[0]).stdout("1")
        }),
        make("stack/let-30k-elaborate", |n| {
            let text = nested(MID, "(let ((val x 1)) ", "x", ")");
            let mut c = Case::new(n, text, &[0]).args(&["elaborate", "{file}"]);
            c.stdout_contains
                .push(b"(let ((val x 1)) (let ((val x 1))".to_vec());
            c
        }),
        make("stack/let-bindings-30k-run", |n| {
            let mut text = String::from("(let ((val x0 0)");
            for k in 1..MID {
                text.push_str(&format!(" (val x{k} (+ x{} 1))", k - 1));
            }
            text.push_str(&format!(") x{})\n", MID - 1));
            Case::new(n, text, &[0]).stdout((MID - 1).to_string())
        }),
        make("stack/lambda-application-30k-run", |n| {
            Case::new(n, nested(MID, "((fn ((x Int)) ", "x", ") 1)"), &[0]).stdout("1")
        }),
        make("stack/lambda-application-30k-elaborate", |n| {
            let mut c = Case::new(n, nested(MID, "((fn ((x Int)) ", "x", ") 1)"), &[0])
                .args(&["elaborate", "{file}"]);
            c.stdout_contains.push(b"((\xce\xbb ((x Int))".to_vec());
            c
        }),
        make("stack/lambda-nest-10k-run", |n| {
            Case::new(n, nested(10_000, "(fn ((x Int)) ", "x", ")"), &[0])
                .stdout("#<fun>")
                .time(5)
        }),
        make("stack/if-100k-run", |n| {
            Case::new(n, nested(DEEP, "(if #t ", "1", " 0)"), &[0, 1]).stdout("1")
        }),
        make("stack/arrow-type-30k-check", |n| {
            let ty = nested(MID, "(-> Int ", "Int", ")");
            let mut c =
                Case::new(n, format!("(fn ((f {})) 5)\n", ty.trim_end()), &[0]).args(&["check", "{file}"]);
            c.stdout_contains.push(b"(-> Int (-> Int".to_vec());
            c
        }),
        make("stack/array-type-10k-run", |n| {
            let ty = nested(10_000, "[", "Int", " 1]");
            Case::new(n, format!("((fn ((x {})) 5) 1)", ty.trim_end()), &[1]).stderr(TOO_MANY_AXES)
        }),
        make("stack/array-type-64-run", |n| {
            let ty = nested(64, "[", "Int", " 1]");
            Case::new(
                n,
                format!("((fn ((x {})) 5) {})", ty.trim_end(), vector(64).trim_end()),
                &[0],
            )
            .stdout("5")
        }),
        make("stack/rank-50k-value-printed", |n| {
            // A value of rank 50000 made at run time, not from nested source.
            Case::new(n, runtime_ones(50_000), &[0])
                .stdout(printed_runtime_ones(50_000))
                .time(5)
        }),
        make("stack/rank-50k-value-futhark", |n| {
            Case::new(n, runtime_ones(50_000), &[0])
                .args(&["run", "--format", "futhark", "{file}"])
                .stdout(format!("{}0i64{}", "[".repeat(50_000), "]".repeat(50_000)))
                .time(5)
        }),
        make("checking/rank-50k-static-shape", |n| {
            // A shape of 50000 axes written out: an error, in linear time.
            Case::new(
                n,
                format!("(i-app iota/static [{}])\n", vec!["1"; 50_000].join(" ")),
                &[1],
            )
            .stderr(TOO_MANY_AXES)
            .time(5)
        }),
        make("checking/sum-over-rank-64", |n| {
            // sum is Π (@s): solving @s for an argument of the most axes.
            Case::new(
                n,
                format!("(sum (i-app iota/static [{}]))\n", vec!["1"; 64].join(" ")),
                &[0],
            )
            .stdout("0")
        }),
        make("checking/sum-over-runtime-rank-50k", |n| {
            Case::new(n, format!("(sum {})", runtime_ones(50_000).trim_end()), &[0])
                .stdout("0")
                .time(5)
        }),
        make("stack/records-10k-run", |n| {
            Case::new(n, nested(10_000, "{(a [] ", "1", ")}"), &[0]).stdout(format!(
                "{}1{}",
                "{a  =  ".repeat(10_000),
                "}".repeat(10_000)
            ))
        }),
        make("stack/field-projections-10k-run", |n| {
            let record = nested(10_000, "{(a [] ", "1", ")}");
            let text = format!(
                "{}{}{}",
                "(field ".repeat(10_000),
                record.trim_end(),
                " a)".repeat(10_000)
            );
            Case::new(n, text, &[0]).time(5).stdout("1")
        }),
        make("stack/deep-argument-10k", |n| {
            // A data value nested 10,000 deep where 64 axes are wanted: read
            // (without overflowing the stack) and refused.
            let mut c = Case::new(n, format!("(entry (main (x {})) x)\n", ones_type(64)), &[1]);
            c.args = vec![
                b"run".to_vec(),
                b"{file}".to_vec(),
                vector(10_000).trim_end().as_bytes().to_vec(),
            ];
            c
        }),
        make("stack/deep-argument-64", |n| {
            let mut c = Case::new(n, format!("(entry (main (x {})) x)\n", ones_type(64)), &[0])
                .stdout(printed_vector(64));
            c.args = vec![
                b"run".to_vec(),
                b"{file}".to_vec(),
                vector(64).trim_end().as_bytes().to_vec(),
            ];
            c
        }),
        make("stack/deep-futhark-input-10k", |n| {
            // A reader may limit the nesting of data it accepts (a clean
            // error), but not overflow.
            Case::new(
                n,
                format!("(entry (main (x {})) x)\n", ones_type(10_000)),
                &[0, 1],
            )
            .args(&["run", "{file}", "--input", "data.in"])
            .file(
                "data.in",
                Setup::Bytes(format!("{}1i64{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes()),
            )
            .stdout(printed_vector(10_000))
        }),
        make("stack/deep-futhark-stdin-100k", |n| {
            let mut c = Case::new(n, "(entry (main (x [Int 1 1])) 7)\n", &[1]);
            c.stdin = Input::Bytes(format!("{}1i64{}", "[".repeat(DEEP), "]".repeat(DEEP)).into_bytes());
            c
        }),
        make("stack/test-runner-deep-program", |n| {
            let test = format!(";; ==\n;; output {{ {MID} }}\n{}", adds(MID));
            Case::new(n, "", &[0])
                .args(&["test", "{dir}/t"])
                .file("t/deep.remora", Setup::Bytes(test.into_bytes()))
                .stdout("1 passed, 0 failed")
        }),
        make("stack/test-runner-deep-expected-value", |n| {
            let test = format!(
                ";; ==\n;; output {{ {} }}\n{}",
                printed_runtime_ones(10_000),
                runtime_ones(10_000)
            );
            Case::new(n, "", &[0])
                .args(&["test", "{dir}/t"])
                .file("t/deep.remora", Setup::Bytes(test.into_bytes()))
                .stdout("1 passed, 0 failed")
        }),
        make("stack/test-runner-input-value-of-64-axes", |n| {
            let test = format!(
                "(entry (main (x {})) 7)\n;; ==\n;; input {{ {} }}\n;; output {{ 7 }}\n",
                ones_type(64),
                printed_vector(64)
            );
            Case::new(n, "", &[0])
                .args(&["test", "{dir}/t"])
                .file("t/deep.remora", Setup::Bytes(test.into_bytes()))
                .stdout("1 passed, 0 failed")
        }),
        make("stack/repl-add-30k", |n| {
            let mut c = Case::new(n, "", &[0]).args(&["repl"]).stdout(MID.to_string());
            c.stdin = Input::Bytes(adds(MID).into_bytes());
            c
        }),
        make("stack/repl-vector-30k", |n| {
            let mut c = Case::new(n, "", &[0]).args(&["repl"]);
            c.stdin = Input::Bytes(vector(MID).into_bytes());
            c.stdout_contains.push(TOO_MANY_AXES.as_bytes().to_vec());
            c
        }),
        make("stack/repl-runtime-rank-30k", |n| {
            let mut c = Case::new(n, "", &[0])
                .args(&["repl"])
                .stdout(printed_runtime_ones(MID));
            c.stdin = Input::Bytes(runtime_ones(MID).into_bytes());
            c
        }),
        make("stack/repl-type-30k", |n| {
            let mut c = Case::new(n, "", &[0]).args(&["repl"]);
            c.stdin = Input::Bytes(format!(":type {}", vector(MID)).into_bytes());
            c.stdout_contains.push(TOO_MANY_AXES.as_bytes().to_vec());
            c
        }),
        make("stack/repl-elab-30k", |n| {
            let mut c = Case::new(n, "", &[0]).args(&["repl"]);
            c.stdin = Input::Bytes(format!(":elab {}", adds(MID)).into_bytes());
            c.stdout_contains.push(b"(+ 1 (+ 1 (+ 1".to_vec());
            c
        }),
        make("stack/repl-unclosed-100k", |n| {
            // Input that never balances, then end of input.
            let mut c = Case::new(n, "", &[0, 1]).args(&["repl"]);
            c.stdin = Input::Bytes("(+ 1 ".repeat(DEEP).into_bytes());
            c
        }),
        make("stack/unclosed-100k", |n| {
            Case::new(n, "(+ 1 ".repeat(DEEP), &[1])
        }),
        make("stack/unopened-100k", |n| {
            Case::new(n, format!("1{}", ")".repeat(DEEP)), &[1])
        }),
        make("stack/brackets-200k-no-atoms", |n| {
            Case::new(n, format!("{}{}", "[".repeat(200_000), "]".repeat(200_000)), &[1])
        }),
        make("stack/type-error-at-the-bottom-30k", |n| {
            Case::new(n, nested(MID, "(+ 1 ", "#t", ")"), &[1])
                .stderr("error:")
                .stderr_max(100_000)
        }),
        make("stack/runtime-error-at-the-bottom-30k", |n| {
            Case::new(n, nested(MID, "(+ 1 ", "(/ 1 0)", ")"), &[1])
                .stderr("divide by zero")
                .stderr_max(100_000)
        }),
        make("stack/unbound-at-the-bottom-30k", |n| {
            Case::new(n, nested(MID, "(+ 1 ", "nothing-here", ")"), &[1])
                .stderr("nothing-here")
                .stderr_max(100_000)
        }),
        make("stack/defs-20k-chain", |n| {
            let mut text = String::from("(def (val x0 0))\n");
            for k in 1..20_000 {
                text.push_str(&format!("(def (val x{k} (+ x{} 1)))\n", k - 1));
            }
            text.push_str("x19999\n");
            Case::new(n, text, &[0]).stdout("19999")
        }),
        make("stack/imports-2000-chain", |n| {
            // a0 imports a1 imports … a1999: the loader recurses per import.
            let mut c = Case::new(n, "(import \"a0.rem\")\nv0\n", &[0, 1]).stdout("0");
            for k in 0..2000 {
                let text = if k == 1999 {
                    "(def (val v1999 1999))\n".to_string()
                } else {
                    format!("(import \"a{}.rem\")\n(def (val v{k} (- v{} 1)))\n", k + 1, k + 1)
                };
                c.setup
                    .push((format!("a{k}.rem"), Setup::Bytes(text.into_bytes())));
            }
            c.stdout = Some(b"0".to_vec());
            c
        }),
    ]
}

/// The generated cases that do not keep their contract yet, and what goes
/// wrong now (the file cases say so with `;; pending:`).
const GENERATED_PENDING: &[(&str, &str)] = &[];

fn generated() -> Vec<Make> {
    let mut all = stack_cases();
    all.extend(checking_cases());
    all.extend(data_cases());
    all.extend(text_cases());
    all
}

/// Quadratic (or worse) checking: each of these should take well under a
/// second; the time limits leave room for a slow machine.
fn checking_cases() -> Vec<Make> {
    vec![
        make("checking/application-40000-arguments", |n| {
            // The example: 7 s to reject.
            Case::new(n, format!("(+ {})\n", "1 ".repeat(40_000)), &[1])
                .time(5)
                .stderr_max(100_000)
        }),
        make("checking/application-40000-arguments-to-a-lambda", |n| {
            Case::new(
                n,
                format!("((fn ((x Int) (y Int)) x) {})\n", "1 ".repeat(40_000)),
                &[1],
            )
            .time(5)
            .stderr_max(100_000)
        }),
        make("checking/lambda-of-20000-parameters-applied", |n| {
            let params: Vec<String> = (0..20_000).map(|k| format!("(x{k} Int)")).collect();
            let text = format!("((fn ({}) x0) {})\n", params.join(" "), "7 ".repeat(20_000));
            Case::new(n, text, &[0]).time(5).stdout("7")
        }),
        make("checking/boxes-900-nested", |n| {
            // The example: 13 s to check.
            Case::new(n, nested(900, "(box ", "5", ")"), &[0])
                .time(5)
                .stdout(format!("{}5{}", "(box [] ".repeat(900), ")".repeat(900)))
        }),
        make("checking/boxes-900-nested-in-vectors", |n| {
            Case::new(n, nested(900, "(box [", "5", "])"), &[0])
                .time(5)
                .stdout(format!("{}5{}", "(box 1 [".repeat(900), "])".repeat(900)))
        }),
        make("checking/boxes-900-nested-check", |n| {
            let mut c = Case::new(n, nested(900, "(box ", "5", ")"), &[0])
                .args(&["check", "{file}"])
                .time(5);
            c.stdout_contains.push("Σ".as_bytes().to_vec());
            c
        }),
        make("checking/boxes-1000-nested-around-a-derivative", |n| {
            // A derivative's program is the whole program written out,
            // each box's type in full: quadratic in the nesting. Type
            // equality substituted at every binder: 30 s, cubic.
            let text = format!(
                "(def (fun (u (x Float)) (f.tan x)))\n{}",
                nested(1000, "(box ", "(vjp u 0.5 1.0)", ")")
            );
            Case::new(n, text, &[0]).time(10).stdout(format!(
                "{}1.2984464{}",
                "(box [] ".repeat(1000),
                ")".repeat(1000)
            ))
        }),
        make("checking/boxes-5000-nested-around-a-derivative", |n| {
            // Written out, 12.5 million type nodes: an allocation abort
            // under the memory limit; refused instead.
            let text = format!(
                "(def (fun (u (x Float)) (f.tan x)))\n{}",
                nested(5000, "(box ", "(vjp u 0.5 1.0)", ")")
            );
            Case::new(n, text, &[1])
                .time(10)
                .stderr("2:1: error: too large to write out in core form")
        }),
        make("checking/boxes-5000-nested-elaborated", |n| {
            Case::new(n, nested(5000, "(box ", "1", ")"), &[1])
                .args(&["elaborate", "{file}"])
                .time(10)
                .stderr("1:1: error: too large to write out in core form")
        }),
        make("checking/vector-200k-deep", |n| {
            // The example: 21 s. With no memory limit the whole
            // stack is had, so the depth is within the reader's limit.
            Case::new(n, vector(200_000), &[0, 1])
                .memory("unlimited")
                .time(5)
                .stdout(printed_vector(200_000))
        }),
        make("checking/vector-100k-deep", |n| {
            Case::new(n, vector(100_000), &[0, 1])
                .time(3)
                .stdout(printed_vector(100_000))
        }),
        make("checking/vector-literal-1m-elements", |n| {
            let items: Vec<String> = (0..1_000_000).map(|k| (k % 10).to_string()).collect();
            let text = format!("[{}]\n", items.join(" "));
            let printed = text.trim_end().to_string();
            Case::new(n, text, &[0]).time(10).stdout(printed)
        }),
        make("checking/frame-of-40000-applications", |n| {
            let text = format!("[{}]\n", "(+ 1 1) ".repeat(40_000));
            Case::new(n, text, &[0])
                .time(10)
                .stdout(format!("[{}]", vec!["2"; 40_000].join(" ")))
        }),
        make("checking/script-20000-expressions", |n| {
            let text = "(+ 1 2)\n".repeat(20_000);
            Case::new(n, text, &[0])
                .time(10)
                .stdout(vec!["3"; 20_000].join("\n"))
        }),
        make("checking/string-1m-characters", |n| {
            Case::new(n, format!("(length \"{}\")\n", "a".repeat(1_000_000)), &[0])
                .time(10)
                .stdout("1000000")
        }),
        make("checking/record-5000-fields", |n| {
            let fields: Vec<String> = (0..5000).map(|k| format!("(f{k} [] {k})")).collect();
            let printed: Vec<String> = (0..5000).map(|k| format!("f{k}  =  {k}")).collect();
            Case::new(n, format!("{{{}}}\n", fields.join(" ")), &[0])
                .time(10)
                .stdout(format!("{{{}}}", printed.join(", ")))
        }),
        make("checking/type-function-5000-parameters", |n| {
            let params: Vec<String> = (0..5000).map(|k| format!("&a{k}")).collect();
            Case::new(n, format!("(t-fn ({}) 1)\n", params.join(" ")), &[0])
                .time(15)
                .stdout("#<tfun>")
        }),
        make("checking/index-function-5000-parameters", |n| {
            let params: Vec<String> = (0..5000).map(|k| format!("$d{k}")).collect();
            Case::new(n, format!("(i-fn ({}) 1)\n", params.join(" ")), &[0])
                .time(15)
                .stdout("#<ifun>")
        }),
        make("checking/left-nested-arrows-10000", |n| {
            let ty = nested(10_000, "(-> ", "Int", " Int)");
            let mut c = Case::new(n, format!("(fn ((f {})) 5)\n", ty.trim_end()), &[0])
                .args(&["check", "{file}"])
                .time(10);
            c.stdout_contains.push(b"(-> (-> (-> Int Int) Int) Int)".to_vec());
            c
        }),
        make("checking/application-5m-arguments", |n| {
            // A 10 MB one-line program: an error, never an allocation abort.
            Case::new(n, format!("(+ {})\n", "1 ".repeat(5_000_000)), &[1])
                .time(15)
                .stderr_max(100_000)
                .heavy()
        }),
        make("checking/dimension-sum-of-20000-terms", |n| {
            let dim = format!("(+ {})", "1 ".repeat(20_000));
            let text = format!("((fn ((x [Int {dim}])) (length x)) (i-app iota/static [{dim}]))\n");
            Case::new(n, text, &[0]).time(10).stdout("20000")
        }),
        make("checking/appends-3000-nested", |n| {
            let text = format!(
                "(length {}[1]{})\n",
                "(append [1] ".repeat(3000),
                ")".repeat(3000)
            );
            Case::new(n, text, &[0]).time(10).stdout("3001")
        }),
        make("checking/10000-type-errors", |n| {
            Case::new(n, "(+ 1 #t)\n".repeat(10_000), &[1])
                .time(10)
                .stderr_max(200_000)
        }),
        make("checking/10000-unbound-names", |n| {
            let text: String = (0..10_000).map(|k| format!("nothing{k}\n")).collect();
            Case::new(n, text, &[1]).time(10).stderr_max(200_000)
        }),
        make("checking/frame-of-20000-lambdas", |n| {
            Case::new(n, format!("[{}]\n", "(fn ((x Int)) x) ".repeat(20_000)), &[0])
                .time(10)
                .stdout(format!("[{}]", vec!["#<fun>"; 20_000].join(" ")))
        }),
        make("checking/repl-20000-continuation-lines", |n| {
            // Each line re-reads all the input so far to see whether it is
            // complete: quadratic.
            let text = format!("{}0{}\n", "(+ 1\n".repeat(20_000), "\n)".repeat(20_000));
            let mut c = Case::new(n, "", &[0]).args(&["repl"]).time(5).stdout("20000");
            c.stdin = Input::Bytes(text.into_bytes());
            c
        }),
    ]
}

/// Data files: `.npy` and Futhark data larger than the repository should
/// hold (sparse files of zeros: no room on the disk), FIFOs and devices.
fn data_cases() -> Vec<Make> {
    const INPUT: &[&str] = &["run", "{file}", "--input", "data.npy"];
    vec![
        make("memory/npy-u1-512mb", |n| {
            // The example: 512 MB of |u1 became 4 GB of Int.
            Case::new(n, "(entry (main (x [Int 536870912])) (sum x))\n", &[0, 1])
                .args(INPUT)
                .file("data.npy", npy_zeros("|u1", false, &[536_870_912], 1))
                .stdout("0")
                .stderr("error:")
                .heavy()
        }),
        make("memory/npy-b1-512mb", |n| {
            Case::new(n, "(entry (main (x [Bool 536870912])) (count x))\n", &[0, 1])
                .args(INPUT)
                .file("data.npy", npy_zeros("|b1", false, &[536_870_912], 1))
                .stdout("0")
                .heavy()
        }),
        make("memory/npy-f8-256mb", |n| {
            Case::new(n, "(entry (main (x [Float 33554432])) (f.sum x))\n", &[0, 1])
                .args(INPUT)
                .file("data.npy", npy_zeros("<f8", false, &[33_554_432], 8))
                .stdout("0.0")
                .heavy()
        }),
        make("memory/npy-i8-1gb-small-memory", |n| {
            Case::new(n, "(entry (main (x [Int 134217728])) (sum x))\n", &[0, 1])
                .args(INPUT)
                .file("data.npy", npy_zeros("<i8", false, &[134_217_728], 8))
                .memory("1000000")
                .stdout("0")
                .heavy()
        }),
        make("hangs/npy-fortran-256mb", |n| {
            // The example: more than 10 s.
            Case::new(n, "(entry (main (x [Int 4096 8192])) (sum x))\n", &[0, 1])
                .args(INPUT)
                .file("data.npy", npy_zeros("<i8", true, &[4096, 8192], 8))
                .time(10)
                .stdout("0")
                .heavy()
        }),
        make("hangs/npy-fortran-transposed-answer", |n| {
            // A small Fortran-order file: its values in row-major order.
            let mut bytes = npy_header("<i8", true, &[2, 3]);
            for v in [0i64, 3, 1, 4, 2, 5] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            Case::new(n, "(entry (main (x [Int 2 3])) x)\n", &[0])
                .args(INPUT)
                .file("data.npy", Setup::Bytes(bytes))
                .stdout("[[0 1 2] [3 4 5]]")
        }),
        make("hangs/npy-wrong-dtype-2gb", |n| {
            // A type mismatch is found from the header, before 2 GB of body
            // is read.
            Case::new(n, "(entry (main (x [Int 536870912])) 1)\n", &[1])
                .args(INPUT)
                .file("data.npy", npy_zeros("<f4", false, &[536_870_912], 4))
                .memory("1000000")
                .time(5)
                .stderr("Float")
                .heavy()
        }),
        make("hangs/npy-wrong-shape-2gb", |n| {
            Case::new(n, "(entry (main (x [Int 3])) 1)\n", &[1])
                .args(INPUT)
                .file("data.npy", npy_zeros("<i8", false, &[268_435_456], 8))
                .memory("1000000")
                .time(5)
                .stderr("error:")
                .heavy()
        }),
        make("hangs/npy-wrong-dtype-fortran-2gb", |n| {
            Case::new(n, "(entry (main (x [Int 8192 32768])) 1)\n", &[1])
                .args(INPUT)
                .file("data.npy", npy_zeros("<f8", true, &[8192, 32768], 8))
                .memory("1000000")
                .time(5)
                .stderr("Float")
                .heavy()
        }),
        make("hangs/futhark-binary-wrong-type-1gb", |n| {
            let mut head = b"b\x02\x01 f32".to_vec();
            head.extend_from_slice(&268_435_456u64.to_le_bytes());
            let len = head.len() as u64 + 268_435_456 * 4;
            Case::new(n, "(entry (main (x [Int 268435456])) 1)\n", &[1])
                .args(&["run", "{file}", "--input", "data.in"])
                .file("data.in", Setup::Sparse { head, len })
                .memory("1000000")
                .time(5)
                .stderr("error:")
                .heavy()
        }),
        make("hangs/fifo-input", |n| {
            Case::new(n, "(entry (main (x Int)) x)\n", &[1])
                .args(&["run", "{file}", "--input", "fifo"])
                .file("fifo", Setup::Fifo)
                .time(3)
        }),
        make("hangs/fifo-import", |n| {
            Case::new(n, "(import \"fifo\")\n(+ 1 2)\n", &[1])
                .file("fifo", Setup::Fifo)
                .time(3)
        }),
        make("hangs/fifo-read-file", |n| {
            Case::new(n, "(@read-file (Int) (_ []) \"fifo\")\n", &[1])
                .file("fifo", Setup::Fifo)
                .time(3)
        }),
        make("hangs/fifo-read-file-f32bin", |n| {
            Case::new(n, "(@read-file-f32bin _ (_ [2]) \"fifo\")\n", &[1])
                .file("fifo", Setup::Fifo)
                .time(3)
        }),
        make("hangs/fifo-program", |n| {
            Case::new(n, "", &[1])
                .args(&["run", "{dir}/fifo"])
                .file("fifo", Setup::Fifo)
                .time(3)
        }),
        make("hangs/fifo-check", |n| {
            Case::new(n, "", &[1])
                .args(&["check", "{dir}/fifo"])
                .file("fifo", Setup::Fifo)
                .time(3)
        }),
        make("hangs/fifo-test-runner", |n| {
            Case::new(n, "", &[1])
                .args(&["test", "{dir}/t"])
                .file("t/a.remora", Setup::Fifo)
                .time(3)
        }),
        make("hangs/fifo-repl-load", |n| {
            let mut c = Case::new(n, "", &[0])
                .args(&["repl"])
                .file("fifo", Setup::Fifo)
                .time(3);
            c.stdin = Input::Bytes(b":load fifo\n(+ 1 2)\n".to_vec());
            c.stdout_contains.push(b"3".to_vec());
            c.output_contains.push(b"error:".to_vec());
            c
        }),
        make("hangs/fifo-symlinked-import", |n| {
            Case::new(n, "(import \"lib.rem\")\n(+ 1 2)\n", &[1])
                .file("fifo", Setup::Fifo)
                .file("lib.rem", Setup::Symlink("{dir}/fifo".into()))
                .time(5)
        }),
        make("hangs/dev-zero-symlinked-import", |n| {
            Case::new(n, "(import \"lib.rem\")\n(+ 1 2)\n", &[1])
                .file("lib.rem", Setup::Symlink("/dev/zero".into()))
                .memory("2000000")
                .time(10)
                .heavy()
        }),
        make("hangs/dev-zero-stdin-data", |n| {
            // An entry with parameters and no arguments reads Futhark data
            // from standard input: NUL bytes are not data.
            Case::new(n, "(entry (main (x Int)) x)\n", &[1])
                .stdin_file("/dev/zero")
                .memory("2000000")
                .time(10)
                .heavy()
        }),
        make("hangs/dev-zero-stdin-input-dash", |n| {
            Case::new(n, "(entry (main (x Int)) x)\n", &[1])
                .args(&["run", "{file}", "--input", "-"])
                .stdin_file("/dev/zero")
                .memory("2000000")
                .time(10)
                .heavy()
        }),
        make("hangs/dev-zero-program-on-stdin", |n| {
            Case::new(n, "", &[1])
                .args(&["parse"])
                .stdin_file("/dev/zero")
                .memory("2000000")
                .time(10)
                .heavy()
        }),
        make("hangs/dev-urandom-program-on-stdin", |n| {
            Case::new(n, "", &[1])
                .args(&["interpret"])
                .stdin_file("/dev/urandom")
                .memory("2000000")
                .time(10)
                .heavy()
        }),
    ]
}

/// Huge tokens, long lines, bytes that are not UTF-8, control bytes.
fn text_cases() -> Vec<Make> {
    const BIG: usize = 2_000_000;
    vec![
        make("small/huge-bad-token-in-data", |n| {
            // The example: the whole 2 MB token was repeated in the
            // message.
            let data = format!("[1i64, {}]", "x".repeat(BIG));
            Case::new(n, "(entry (main (x [Int 2])) x)\n", &[1])
                .args(&["run", "{file}", "--input", "data.in"])
                .file("data.in", Setup::Bytes(data.into_bytes()))
                .stderr_max(20_000)
        }),
        make("small/huge-bad-token-on-stdin-data", |n| {
            let mut c = Case::new(n, "(entry (main (x Int)) x)\n", &[1]).stderr_max(20_000);
            c.stdin = Input::Bytes(format!("12{}", "q".repeat(BIG)).into_bytes());
            c
        }),
        make("small/huge-unbound-identifier", |n| {
            Case::new(n, format!("(+ 1 {})\n", "y".repeat(BIG)), &[1]).stderr_max(20_000)
        }),
        make("small/huge-integer-literal", |n| {
            Case::new(n, format!("(+ 1 {})\n", "9".repeat(BIG)), &[1]).stderr_max(20_000)
        }),
        make("small/huge-float-literal", |n| {
            Case::new(n, format!("(f.+ 1.0 1.5{})\n", "0".repeat(BIG)), &[0, 1])
                .stdout("2.5")
                .stderr_max(20_000)
        }),
        make("small/huge-unterminated-string", |n| {
            Case::new(n, format!("(length \"{}\n", "s".repeat(BIG)), &[1]).stderr_max(20_000)
        }),
        make("small/huge-line-with-error-at-its-end", |n| {
            Case::new(n, format!("{}(+ 1 #t)\n", " ".repeat(BIG)), &[1]).stderr_max(20_000)
        }),
        make("small/huge-comment-then-error", |n| {
            Case::new(n, format!("; {}\n(+ 1 #t)\n", "c".repeat(BIG)), &[1]).stderr_max(20_000)
        }),
        make("small/huge-bad-token-in-argument", |n| {
            let mut c = Case::new(n, "(entry (main (x Int)) x)\n", &[1]).stderr_max(20_000);
            c.args = vec![
                b"run".to_vec(),
                b"{file}".to_vec(),
                "z".repeat(100_000).into_bytes(),
            ];
            c
        }),
        make("small/huge-entry-name", |n| {
            let mut c = Case::new(n, "(entry (main) 1)\n", &[1]).stderr_max(20_000);
            c.args = vec![
                b"run".to_vec(),
                b"--entry".to_vec(),
                "e".repeat(100_000).into_bytes(),
                b"{file}".to_vec(),
            ];
            c
        }),
        make("small/huge-type-in-error", |n| {
            // A type error whose types are huge: the message is bounded.
            let ty = ones_type(10_000);
            Case::new(n, format!("((fn ((x {ty})) 5) #t)\n"), &[1]).stderr_max(20_000)
        }),
        make("small/huge-npy-descr", |n| {
            let dict = format!(
                "{{'descr': '{}', 'fortran_order': False, 'shape': (1,), }}",
                "<".repeat(60_000)
            );
            let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
            bytes.extend_from_slice(&(dict.len() as u16 + 1).to_le_bytes());
            bytes.extend_from_slice(dict.as_bytes());
            bytes.push(b'\n');
            Case::new(n, "(entry (main (x [Int 1])) x)\n", &[1])
                .args(&["run", "{file}", "--input", "data.npy"])
                .file("data.npy", Setup::Bytes(bytes))
                .stderr_max(20_000)
        }),
        make("small/huge-token-with-control-bytes", |n| {
            // A huge bad token holding escape sequences: cut, and escaped.
            let token = "\x1b[2J\x1b]0;pwned\x07".repeat(20_000);
            Case::new(n, format!("(+ 1 x{token})\n"), &[1])
                .stderr_max(20_000)
                .stderr_not("\x1b[2J")
                .stderr_not("\x1b]0;")
        }),
        make("small/huge-repl-line", |n| {
            let mut c = Case::new(n, "", &[0]).args(&["repl"]);
            c.stdin = Input::Bytes(format!("{}\n(+ 1 2)\n", "w".repeat(BIG)).into_bytes());
            c.stdout_contains.push(b"3".to_vec());
            c.stdout_max = Some(20_000);
            c
        }),
        make("memory/one-line-10mb-program", |n| {
            // The example: a 10 MB one-line program needed a 1.4 GB
            // allocation.
            let items: Vec<String> = (0..1_500_000).map(|k| k.to_string()).collect();
            Case::new(n, format!("(sum [{}])\n", items.join(" ")), &[0])
                .stdout("1124999250000")
                .heavy()
        }),
        make("memory/one-line-10mb-program-1gb", |n| {
            let items: Vec<String> = (0..1_500_000).map(|k| k.to_string()).collect();
            Case::new(n, format!("(sum [{}])\n", items.join(" ")), &[0, 1])
                .stdout("1124999250000")
                .memory("1000000")
                .heavy()
        }),
        make("small/invalid-utf8-in-source", |n| {
            // The error at the bad byte: line 2, column 4.
            Case::new(n, b"(+ 1 2)\n(+ \xff 1)\n".to_vec(), &[1]).stderr(".remora:2:4: error: not UTF-8 text")
        }),
        make("small/invalid-utf8-in-comment", |n| {
            Case::new(n, b"; caf\xe9\n(+ 1 2)\n".to_vec(), &[0, 1]).stdout("3")
        }),
        make("small/invalid-utf8-in-string", |n| {
            Case::new(n, b"(length \"\xc3\x28\")\n".to_vec(), &[1])
        }),
        make("small/nul-bytes-in-source", |n| {
            Case::new(n, b"(+ 1\x00 2)\n".to_vec(), &[1])
        }),
        make("small/invalid-utf8-program-on-stdin", |n| {
            let mut c = Case::new(n, "", &[1])
                .args(&["parse"])
                .stderr("<cli>:1:6: error: not UTF-8 text");
            c.stdin = Input::Bytes(b"(+ 1 \xfe)\n".to_vec());
            c
        }),
        make("small/invalid-utf8-test-file", |n| {
            Case::new(n, "", &[1])
                .args(&["test", "{dir}/t"])
                .file(
                    "t/bad.remora",
                    Setup::Bytes(b";; ==\n;; output { 3 }\n(+ 1 \xff)\n".to_vec()),
                )
                .stderr("error:")
        }),
        make("small/invalid-utf8-argument", |n| {
            let mut c = Case::new(n, "(entry (main (x Int)) x)\n", &[1, 2]);
            c.args = vec![b"run".to_vec(), b"{file}".to_vec(), b"\xff\xfe".to_vec()];
            c.stderr("error:")
        }),
        make("small/invalid-utf8-import-file", |n| {
            Case::new(n, "(import \"lib.rem\")\n(+ 1 2)\n", &[1])
                .file("lib.rem", Setup::Bytes(b"(def (val x \xff))\n".to_vec()))
                .stderr("lib.rem")
        }),
        make("small/invalid-utf8-read-file", |n| {
            Case::new(n, "(@read-file (Int) (_ []) \"v.txt\")\n", &[1])
                .file("v.txt", Setup::Bytes(b"\xff\n".to_vec()))
        }),
        make("small/invalid-utf8-repl-load", |n| {
            let mut c = Case::new(n, "", &[0])
                .args(&["repl"])
                .file("lib.rem", Setup::Bytes(b"(def (val x \xff))\n".to_vec()));
            c.stdin = Input::Bytes(b":load lib.rem\n(+ 1 2)\n".to_vec());
            c.stdout_contains.push(b"3".to_vec());
            c.output_contains.push(b"error:".to_vec());
            c
        }),
    ]
}
