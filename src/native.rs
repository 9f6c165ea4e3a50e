//! The compiled engine: a program's C (from `remora-compile`) built by the
//! system's C compiler into an executable, cached, and run as a child
//! process that exchanges values in Futhark's binary data format.
//!
//! * The C compiler is `$CC`, else `cc`; `auto` runs the interpreter when
//!   there is none.
//! * Executables are cached in `$XDG_CACHE_HOME/remora` (else
//!   `~/.cache/remora`, else the temporary directory) by a hash of the C
//!   text and the compiler's command; the C text is kept beside the
//!   executable and compared, so a hash collision cannot run the wrong
//!   program. A second run of the same program does not compile.
//! * The child reads the entry's arguments on standard input and writes
//!   its results on standard output. A run-time error (exit status 3) is
//!   reported by running the program again on the interpreter, which gives
//!   the positioned message.

use remora_value::{Array, Data};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The flags every program is compiled with: optimised for this machine,
/// and no floating-point contraction (`a*b+c` stays two roundings, as the
/// interpreter computes it).
pub const FLAGS: &[&str] = &[
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fno-math-errno",
    // No operation traps, so a select whose arms compute (the special
    // values of the runtime's rt_expf, rt_powf …) is if-converted and the
    // loop vectorises; no result changes.
    "-fno-trapping-math",
    "-std=c11",
    "-w",
    // The C compiler must not compute a math function of a constant
    // itself (correctly rounded) where the program at run time calls the
    // C library's (as the interpreter does), which may differ in the last
    // bit: `(f.tan -1.5707964)`.
    "-fno-builtin-sinf",
    "-fno-builtin-cosf",
    "-fno-builtin-tanf",
    "-fno-builtin-asinf",
    "-fno-builtin-acosf",
    "-fno-builtin-atanf",
    "-fno-builtin-atan2f",
    "-fno-builtin-sinhf",
    "-fno-builtin-coshf",
    "-fno-builtin-tanhf",
    "-fno-builtin-expf",
    "-fno-builtin-logf",
    "-fno-builtin-log2f",
    "-fno-builtin-log10f",
    "-fno-builtin-powf",
    "-fno-builtin-exp",
    "-fno-builtin-log",
    "-fno-builtin-cos",
];

/// The flags of [`run_with`]'s quick builds.
const QUICK: &[&str] = &["-O1", "-ffp-contract=off", "-std=c11", "-w", "-fno-builtin"];

/// Whether the program runs in a sandbox (`remora run --sandbox`): the
/// compiled program is then told (`REMORA_SANDBOX`) to fail where it
/// would read a file, and the interpreter, run again, refuses it.
pub static SANDBOX: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Why the compiled engine did not give the values.
pub enum Failure {
    /// The program cannot be compiled yet (or there is no C compiler):
    /// what and where.
    Unsupported(remora_syntax::Span, String),
    /// The compiled program stopped with a run-time error; its message.
    Run(String),
    /// Something broke that should not have (the C compiler rejected our
    /// C, the child crashed): a bug, said so.
    Internal(String),
}

impl Failure {
    /// What broke, where the compiled engine has a bug: an internal
    /// failure, or a compiler level whose verifier refused what the
    /// passes made ("internal error: the … level breaks its rules"),
    /// which `auto` runs on the interpreter but is not a construct the
    /// compiler does not handle yet.
    pub fn broken(&self) -> Option<&str> {
        match self {
            Failure::Internal(what) => Some(what),
            Failure::Unsupported(_, what) if what.starts_with("internal error") => Some(what),
            Failure::Unsupported(..) | Failure::Run(_) => None,
        }
    }
}

/// The C compiler's command: `$CC`, else `cc`, if it runs.
pub fn c_compiler() -> Option<String> {
    static FOUND: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    FOUND.get_or_init(find_c_compiler).clone()
}

fn find_c_compiler() -> Option<String> {
    let cc = std::env::var("CC")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    let ok = Command::new(&cc)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(cc)
}

/// The compile cache's directory where it is not the user's (the test
/// suite's, under `target/`): set once, before anything is compiled.
pub static CACHE_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The compile cache's directory.
pub(crate) fn cache_dir() -> PathBuf {
    if let Some(dir) = CACHE_DIR.get() {
        return dir.clone();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    match base {
        Some(b) => b.join("remora"),
        None => std::env::temp_dir().join("remora-cache"),
    }
}

/// FNV-1a, 64 bits: the cache key (collisions are caught by comparing
/// the kept C text).
pub(crate) fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The executable for `c_text`, from the cache in `dir` or compiled now;
/// and whether it was compiled.
pub fn build_in(dir: &Path, c_text: &str, cc: &str, flags: &[&str]) -> Result<(PathBuf, bool), Failure> {
    let flag_list = flags;
    let flags = flags.join(" ");
    let key = fnv(&[c_text.as_bytes(), cc.as_bytes(), flags.as_bytes()]);
    let dir = dir.to_path_buf();
    let exe = dir.join(format!("{key:016x}"));
    let kept = dir.join(format!("{key:016x}.c"));
    if exe.is_file() && std::fs::read(&kept).is_ok_and(|t| t == c_text.as_bytes()) {
        return Ok((exe, false));
    }
    let internal = |m: String| Failure::Internal(m);
    std::fs::create_dir_all(&dir).map_err(|e| internal(format!("cannot create {}: {e}", dir.display())))?;
    // Unique to this build: threads of one process may build the same
    // program at once.
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("{}-{n}-{key:016x}", std::process::id());
    let source = dir.join(format!("tmp-{id}.c"));
    let built = dir.join(format!("tmp-{id}"));
    std::fs::write(&source, c_text)
        .map_err(|e| internal(format!("cannot write {}: {e}", source.display())))?;
    let out = Command::new(cc)
        .args(flag_list)
        .arg("-o")
        .arg(&built)
        .arg(&source)
        .args(["-lm", "-pthread"])
        .stdin(Stdio::null())
        .output();
    let _ = std::fs::remove_file(&source);
    let out = out.map_err(|e| internal(format!("cannot run the C compiler {cc}: {e}")))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&built);
        let err = String::from_utf8_lossy(&out.stderr);
        let first: String = err.lines().take(12).collect::<Vec<_>>().join("\n");
        return Err(internal(format!("the C compiler rejected the program:\n{first}")));
    }
    // The C text first, then the executable: a reader that finds the
    // executable finds its text.
    let kept_tmp = dir.join(format!("tmp-{id}.kept"));
    std::fs::write(&kept_tmp, c_text)
        .and_then(|()| std::fs::rename(&kept_tmp, &kept))
        .and_then(|()| std::fs::rename(&built, &exe))
        .map_err(|e| internal(format!("cannot keep the executable in {}: {e}", dir.display())))?;
    Ok((exe, true))
}

/// The executable run on `inputs`: its results.
pub fn execute(exe: &Path, inputs: &[Array]) -> Result<Vec<Array>, Failure> {
    let (values, err) = execute_env(exe, inputs, &[])?;
    // The runtime's profile (`REMORA_PROFILE=1`: its parallel regions'
    // times and threads) passed on to this process's standard error.
    for line in err.lines().filter(|l| l.starts_with("remora-profile: ")) {
        eprintln!("{line}");
    }
    Ok(values)
}

/// [`execute`] with variables added to the child's environment
/// (`REMORA_THREADS`, `REMORA_TIMING`): its results and what it wrote on
/// standard error.
pub fn execute_env(
    exe: &Path,
    inputs: &[Array],
    env: &[(&str, &str)],
) -> Result<(Vec<Array>, String), Failure> {
    let mut bytes = Vec::new();
    for a in inputs {
        bytes.extend(remora_value::futhark::write_binary(a).map_err(Failure::Internal)?);
    }
    let mut child = Command::new(exe)
        .envs(env.iter().copied())
        .envs(
            SANDBOX
                .load(std::sync::atomic::Ordering::Relaxed)
                .then_some(("REMORA_SANDBOX", "1")),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failure::Internal(format!("cannot run {}: {e}", exe.display())))?;
    let mut stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(s) = stdin.as_mut() {
            let _ = s.write_all(&bytes);
        }
    });
    let mut stderr = child.stderr.take();
    let err_reader = std::thread::spawn(move || {
        let mut e = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.take(1 << 20).read_to_end(&mut e);
        }
        e
    });
    let mut out = Vec::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_end(&mut out);
    }
    let status = child
        .wait()
        .map_err(|e| Failure::Internal(format!("waiting for {}: {e}", exe.display())))?;
    let _ = writer.join();
    let err = err_reader.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&err);
    match status.code() {
        Some(0) => remora_value::futhark::read_data(&out)
            .map(|values| (values, err.to_string()))
            .map_err(|m| Failure::Internal(format!("the compiled program's results: {m}"))),
        Some(3) => Err(Failure::Run(
            err.lines()
                .find_map(|l| l.strip_prefix("remora-error: "))
                .unwrap_or("run-time error")
                .to_string(),
        )),
        _ => Err(Failure::Internal(format!(
            "the compiled program stopped ({status}){}",
            if err.is_empty() {
                String::new()
            } else {
                format!(": {}", err.trim())
            }
        ))),
    }
}

/// A base value (Int, Float or Bool atoms) as an array of another
/// function type.
pub fn base<F, G>(a: Array<F>) -> Option<Array<G>> {
    match &a.data {
        Data::Int(_) | Data::Float(_) | Data::Bool(_) => Some(Array {
            shape: a.shape,
            data: a.data.base_atoms(),
        }),
        _ => None,
    }
}

/// A result (base atoms, boxes of them, or records) as an array of another
/// function type.
pub fn result<G>(a: Array) -> Option<Array<G>> {
    use remora_value::{Atom, Boxed, RecordField, Records};
    if let Data::Records(r) = &a.data {
        let mut fields = Vec::with_capacity(r.fields.len());
        for f in &r.fields {
            let mut shape = vec![r.count];
            shape.extend(f.cell.iter().copied());
            let field = result(Array {
                shape,
                data: f.data.clone(),
            })?;
            fields.push(RecordField {
                name: f.name.clone(),
                cell: f.cell.clone(),
                data: field.data,
            });
        }
        return Some(Array {
            shape: a.shape,
            data: Data::records(Records {
                count: r.count,
                fields,
            }),
        });
    }
    let Data::Atoms(atoms) = &a.data else {
        return base(a);
    };
    let mut out = Vec::new();
    for atom in atoms.iter() {
        let Atom::Box(b) = atom else {
            return None;
        };
        out.push(Atom::Box(Boxed {
            witnesses: b.witnesses.clone(),
            payload: result(b.payload.clone())?,
        }));
    }
    Some(Array {
        shape: a.shape,
        data: Data::Atoms(out.into()),
    })
}

/// A checked program's entry `entry` (or its bare expressions) compiled
/// and run on `inputs`: its results.
pub fn run(
    decls: &[remora_check::typed::TDecl],
    names: &remora_check::NameTable,
    entry: &str,
    inputs: &[Array],
) -> Result<Vec<Array>, Failure> {
    run_with(decls, names, entry, inputs, false)
}

/// [`run`], compiled `quick`ly (less optimisation, for tests: the same
/// results, since no level of optimisation changes a float operation).
pub fn run_with(
    decls: &[remora_check::typed::TDecl],
    names: &remora_check::NameTable,
    entry: &str,
    inputs: &[Array],
    quick: bool,
) -> Result<Vec<Array>, Failure> {
    let (values, traced) = run_traced(decls, names, entry, inputs, quick)?;
    emit(&traced)?;
    Ok(values)
}

/// [`run_with`], its traced values given back, not printed.
pub fn run_traced(
    decls: &[remora_check::typed::TDecl],
    names: &remora_check::NameTable,
    entry: &str,
    inputs: &[Array],
    quick: bool,
) -> Result<(Vec<Array>, Vec<Traced>), Failure> {
    let program = lowered(decls, names, entry, inputs)?;
    let exe = executable(&program, if quick { QUICK } else { FLAGS })?;
    let values = execute(&exe, &with_files(&program, inputs)?)?;
    let (values, traced) = traced(&program, values)?;
    Ok((boxed(&program.outputs, values), traced))
}

/// A value the program traced (`trace`, `trace-file`), and where it goes.
pub struct Traced {
    pub site: remora_compile::loops::TraceSite,
    pub value: Array,
}

/// The program's results, and the traced values written before them
/// (each a tag naming its site, then the value).
fn traced(
    program: &remora_compile::loops::Program,
    mut values: Vec<Array>,
) -> Result<(Vec<Array>, Vec<Traced>), Failure> {
    let broken = || Failure::Internal("the compiled program's traced values".into());
    let first = values
        .len()
        .checked_sub(program.outputs.len())
        .ok_or_else(broken)?;
    let results = values.split_off(first);
    let mut out = Vec::with_capacity(values.len() / 2);
    let mut values = values.into_iter();
    while let Some(tag) = values.next() {
        let site = match &tag.data {
            Data::Int(t) if tag.shape.is_empty() => usize::try_from(t[0])
                .ok()
                .and_then(|t| program.traces.get(t))
                .ok_or_else(broken)?,
            _ => return Err(broken()),
        };
        let value = values.next().ok_or_else(broken)?;
        out.push(Traced {
            site: site.clone(),
            value,
        });
    }
    Ok((results, out))
}

/// Each traced value as the interpreter prints it: where it goes (a
/// file, or standard error) and its line. A value too large to print is
/// a run-time error (the interpreter's message, run again).
pub fn trace_lines(traced: &[Traced]) -> Result<Vec<(Option<&str>, String)>, Failure> {
    traced
        .iter()
        .map(|t| {
            let text = match &t.value.data {
                Data::Int(points) if t.site.text => points
                    .iter()
                    .map(|&c| u32::try_from(c).ok().and_then(char::from_u32))
                    .collect::<Option<String>>(),
                _ => None,
            };
            let line = match text {
                Some(text) => text,
                None => remora_value::print::to_string_checked(&t.value).map_err(Failure::Run)?,
            };
            Ok((t.site.file.as_deref(), line))
        })
        .collect()
}

/// Whether every file the program traces into can be appended to (the
/// interpreter's `trace-file` error where one cannot, or in a sandbox, on
/// the program run again: nothing is written first, so nothing twice).
pub fn trace_files_writable(traced: &[Traced]) -> Result<(), Failure> {
    let mut seen = std::collections::HashSet::new();
    for path in traced.iter().filter_map(|t| t.site.file.as_deref()) {
        // (In a sandbox, no file is written: the interpreter's error.)
        if SANDBOX.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Failure::Run(format!(
                "trace-file: {path}: a file written in a sandbox"
            )));
        }
        if seen.insert(path) {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| Failure::Run(format!("trace-file: cannot write {path}: {e}")))?;
        }
    }
    Ok(())
}

/// The traced values printed, in order: on standard error, or appended
/// to their files (`trace-file`).
pub fn emit(traced: &[Traced]) -> Result<(), Failure> {
    if traced.is_empty() {
        return Ok(());
    }
    let lines = trace_lines(traced)?;
    trace_files_writable(traced)?;
    for (file, line) in lines {
        match file {
            None => eprintln!("{line}"),
            Some(path) => {
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .and_then(|mut f| writeln!(f, "{line}"));
                if let Err(e) = written {
                    return Err(Failure::Internal(format!("trace-file: cannot write {path}: {e}")));
                }
            }
        }
    }
    Ok(())
}

/// The executable of `program` (at the loop level) compiled with `flags`,
/// from the compile cache or built now.
pub fn executable(program: &remora_compile::loops::Program, flags: &[&str]) -> Result<PathBuf, Failure> {
    executable_in(&cache_dir(), program, flags)
}

/// [`executable`] with the cache in `dir`.
pub fn executable_in(
    dir: &Path,
    program: &remora_compile::loops::Program,
    flags: &[&str],
) -> Result<PathBuf, Failure> {
    let Some(cc) = c_compiler() else {
        return Err(Failure::Unsupported(
            remora_syntax::Span::default(),
            "no C compiler (set CC, or install cc)".into(),
        ));
    };
    let text = remora_compile::c::emit(program);
    if text.len() > remora_compile::MAX_C_BYTES {
        return Err(Failure::Unsupported(
            remora_syntax::Span::default(),
            format!(
                "too large for the compiled engine: more than {} bytes of C",
                remora_compile::MAX_C_BYTES
            ),
        ));
    }
    build_in(dir, &text, &cc, flags).map(|(exe, _)| exe)
}

/// [`run`] by `exe`, the program compiled before (`remora build`): lowered
/// again for its outputs' kinds, not compiled.
pub fn run_built(
    decls: &[remora_check::typed::TDecl],
    names: &remora_check::NameTable,
    entry: &str,
    inputs: &[Array],
    exe: &Path,
) -> Result<Vec<Array>, Failure> {
    let program = lowered(decls, names, entry, inputs)?;
    let values = execute(exe, &with_files(&program, inputs)?)?;
    let (values, traced) = traced(&program, values)?;
    emit(&traced)?;
    Ok(boxed(&program.outputs, values))
}

/// The program at the loop level, if it compiles and takes `inputs`.
fn lowered(
    decls: &[remora_check::typed::TDecl],
    names: &remora_check::NameTable,
    entry: &str,
    inputs: &[Array],
) -> Result<remora_compile::loops::Program, Failure> {
    // A program with no entry to run, or several, is the caller's mistake
    // too: the interpreter reports it, at its place.
    use remora_check::typed::{EntryToRun, TDecl, entry_to_run};
    let script = decls.iter().any(|d| matches!(d, TDecl::Expr(_))) && inputs.is_empty();
    match entry_to_run(decls, entry) {
        EntryToRun::One(..) => {}
        EntryToRun::NoEntries if script => {}
        EntryToRun::NoEntries | EntryToRun::Missing => {
            return Err(Failure::Run(format!("program has no {entry} entry")));
        }
        EntryToRun::Several(_) => return Err(Failure::Run(format!("multiple {entry} entries"))),
    }
    let program =
        remora_compile::loops(decls, names, entry).map_err(|u| Failure::Unsupported(u.span, u.what))?;
    if program.inputs.len() != inputs.len() + program.files.len() {
        // The caller's mistake, not the compiler's limit: an error of the
        // run, which the interpreter reports as it does on its own.
        return Err(Failure::Run(format!(
            "{entry} expects {} arguments but got {}",
            program.inputs.len() - program.files.len(),
            inputs.len()
        )));
    }
    Ok(program)
}

/// The compiled program's arguments: `inputs`, with the files it reads
/// (read now, as the interpreter reads them) in their places.
fn with_files(program: &remora_compile::loops::Program, inputs: &[Array]) -> Result<Vec<Array>, Failure> {
    let mut all = Vec::with_capacity(program.inputs.len());
    let mut args = inputs.iter();
    for k in 0..program.inputs.len() {
        match program.files.iter().find(|f| f.input == k) {
            Some(f) => all.push(read_file(f)?),
            None => all.extend(args.next().cloned()),
        }
    }
    Ok(all)
}

/// A record result's fields (each with the records' frame in front) as
/// one array of records.
fn records(fields: Vec<(remora_compile::loops::RecordField, Array)>) -> Array {
    use remora_value::{RecordField, Records};
    let frame: Vec<usize> = match fields.first() {
        Some((f, v)) => v.shape[..f.frame.min(v.shape.len())].to_vec(),
        None => Vec::new(),
    };
    let fields = fields
        .into_iter()
        .map(|(f, v)| RecordField {
            name: f.name,
            cell: v.shape[f.frame.min(v.shape.len())..].to_vec(),
            data: v.data,
        })
        .collect();
    Array {
        data: Data::records(Records {
            count: frame.iter().product(),
            fields,
        }),
        shape: frame,
    }
}

/// The program's outputs as values: a witness output and the output
/// after it (its payload) make one box.
pub fn boxed(outputs: &[remora_compile::loops::Output], values: Vec<Array>) -> Vec<Array> {
    use remora_compile::loops::Witness as Kind;
    use remora_value::{Atom, Boxed, Witness};
    let mut out = Vec::new();
    let mut witnesses = Vec::new();
    let mut fields = Vec::new();
    for (o, v) in outputs.iter().zip(values) {
        if let Some(kind) = o.witness.clone() {
            witnesses.push((kind, v));
            continue;
        }
        let mut v = v;
        if let Some(field) = &o.record {
            fields.push((field.clone(), v));
            if !field.last {
                continue;
            }
            v = records(std::mem::take(&mut fields));
        }
        while let Some((kind, w)) = witnesses.pop() {
            let sizes: Vec<i64> = match &w.data {
                Data::Int(xs) => xs.iter().copied().collect(),
                _ => Vec::new(),
            };
            let witness = match kind {
                Kind::Dim => Witness::Dim(sizes.first().copied().unwrap_or(0)),
                Kind::Shape => Witness::Shape(sizes),
                Kind::Frame(kinds) => {
                    v = frame_of_boxes(&w, &kinds, &v);
                    continue;
                }
            };
            v = Array {
                shape: Vec::new(),
                data: Data::Atoms(
                    vec![Atom::Box(Boxed {
                        witnesses: vec![witness],
                        payload: v,
                    })]
                    .into(),
                ),
            };
        }
        out.push(v);
    }
    out
}

/// An array of boxes from its witnesses' output `w` (the frame, then each
/// box's witness sizes and payload extents) and all its payloads' atoms.
fn frame_of_boxes(w: &Array, kinds: &[(bool, usize)], payloads: &Array) -> Array {
    use remora_value::{Atom, Boxed, Witness};
    let Data::Int(sizes) = &w.data else {
        return payloads.clone();
    };
    let (frame, width) = match w.shape.split_last() {
        Some((width, frame)) => (frame.to_vec(), *width),
        None => (Vec::new(), 0),
    };
    let mut boxes = Vec::new();
    let mut at = 0usize;
    let rank: usize = kinds.iter().map(|k| k.1).sum();
    for cell in sizes.chunks(width.max(1)).take(frame.iter().product()) {
        let (witness, dims) = cell.split_at(rank.min(cell.len()));
        let dims: Vec<usize> = dims.iter().map(|d| usize::try_from(*d).unwrap_or(0)).collect();
        let n: usize = dims.iter().product();
        let end = at + n;
        let data = match &payloads.data {
            Data::Int(xs) => Data::Int(xs.get(at..end).unwrap_or_default().to_vec().into()),
            Data::Float(xs) => Data::Float(xs.get(at..end).unwrap_or_default().to_vec().into()),
            Data::Bool(xs) => Data::Bool(xs.get(at..end).unwrap_or_default().to_vec().into()),
            _ => return payloads.clone(),
        };
        at = end;
        // A box of a box: one box per witness, the outermost first.
        let mut v = Array { shape: dims, data };
        let mut sizes = witness.len();
        for (shape, n) in kinds.iter().rev() {
            let start = sizes.saturating_sub(*n);
            let w = &witness[start..sizes];
            sizes = start;
            let witness = if *shape {
                Witness::Shape(w.to_vec())
            } else {
                Witness::Dim(w.first().copied().unwrap_or(0))
            };
            v = Array {
                shape: Vec::new(),
                data: Data::Atoms(
                    vec![Atom::Box(Boxed {
                        witnesses: vec![witness],
                        payload: v,
                    })]
                    .into(),
                ),
            };
        }
        let Data::Atoms(one) = v.data else {
            return payloads.clone();
        };
        boxes.extend(one.iter().cloned());
    }
    Array {
        shape: frame,
        data: Data::Atoms(boxes.into()),
    }
}

/// The value of a file the program reads (`read-file`), as the
/// interpreter reads it; where that fails, a run-time failure (the
/// interpreter, run again, gives the message).
fn read_file(f: &remora_compile::loops::FileInput) -> Result<Array, Failure> {
    use remora_compile::loops::Elem;
    let stop = |what: &str| Failure::Run(format!("read-file: {}: {what}", f.path));
    if SANDBOX.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(stop("a file read in a sandbox"));
    }
    let text = remora_syntax::files::read_text(Path::new(&f.path), remora_syntax::files::MAX_SOURCE_BYTES)
        .map_err(|e| stop(&e))?;
    let mut sources = remora_syntax::SourceMap::new();
    let parsed =
        remora_syntax::parse_expression(&mut sources, &f.path, &text, remora_syntax::Dialect::Source);
    if parsed.has_errors() {
        return Err(stop("does not parse"));
    }
    let checked = remora_check::check_expression(&parsed.value);
    let Some(typed) = checked.value.as_ref().filter(|_| !checked.has_errors()) else {
        return Err(stop("does not type-check"));
    };
    let value = remora_interp::Interpreter::default()
        .eval(typed, &Default::default())
        .map_err(|e| stop(&e.message))?;
    let value = base(value).ok_or_else(|| stop("holds no Int, Float or Bool atoms"))?;
    match (f.elem, &value.data) {
        (Elem::Int, Data::Int(_)) | (Elem::Float, Data::Float(_)) | (Elem::Bool, Data::Bool(_)) => Ok(value),
        _ => Err(stop("holds atoms of another type")),
    }
}
