//! The test suite: every `.remora` file under `tests/` (and the programs in
//! `examples/`), each case a test, run by `remora::testing` (the same
//! harness as `remora test`). Every case with a `parse-error:` or
//! `type-error:` check also has its rendered diagnostics snapshot-tested
//! (tests/snapshots), and so has every `dump:` its compiler level; every
//! case with runs must also lower to the compiler's explicit maps.
//! The project's Markdown documents are checked to stand alone: every
//! relative link names a file of the repository.

use libtest_mimic::{Arguments, Failed, Trial};
use remora::testing::{collect, run_case};
use remora_syntax::testblock::parse_cases;
use std::path::{Path, PathBuf};

fn main() {
    // Every run case also runs without batched application, elaborated
    // and lowered by the compiler, and must agree.
    remora::testing::COMPARE_WITH_REFERENCE.store(true, std::sync::atomic::Ordering::Relaxed);
    // And, where a C compiler is found, compiled (what compiles).
    let compiled = remora::native::c_compiler().is_some();
    // Its executables cached under target/, not in the user's cache.
    let _ = remora::native::CACHE_DIR.set(PathBuf::from(concat!(env!("CARGO_TARGET_TMPDIR"), "/cache")));
    remora::testing::COMPARE_COMPILED.store(compiled, std::sync::atomic::Ordering::Relaxed);
    let args = Arguments::from_args();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["tests", "examples"] {
        collect(&root.join(dir), &mut files);
    }
    files.sort();
    // The examples of the language guide and the prelude reference, each
    // document a case file of its own.
    for doc in ["docs/guide.md", "docs/prelude.md"] {
        let doc = root.join(doc);
        if doc.exists() {
            files.push(doc);
        }
    }
    let mut trials = Vec::new();
    for doc in documents(&root) {
        let rel = doc.strip_prefix(&root).unwrap_or(&doc).display().to_string();
        let root = root.clone();
        trials.push(Trial::test(format!("{rel}::links"), move || {
            links_stay_inside(&root, &doc).map_err(Failed::from)
        }));
    }
    for file in files {
        let rel = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) => {
                trials.push(Trial::test(rel.clone(), move || {
                    Err(format!("cannot read: {e}").into())
                }));
                continue;
            }
        };
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = if file.extension().is_some_and(|e| e == "md") {
            match remora::testing::markdown_cases(&text) {
                Ok(cases) => cases,
                Err(e) => {
                    trials.push(Trial::test(rel.clone(), move || Err(e.into())));
                    continue;
                }
            }
        } else {
            text
        };
        match parse_cases(&text, &stem) {
            Err(e) => trials.push(Trial::test(rel.clone(), move || Err(e.into()))),
            Ok(cases) => {
                for case in cases {
                    let name = format!("{rel}::{}", case.name);
                    let file = file.clone();
                    let rel = rel.clone();
                    trials.push(Trial::test(name.clone(), move || {
                        let result = remora_syntax::stack::run_deep(move || run_case(&rel, &file, &case));
                        match result {
                            Err(message) => Err(message.into()),
                            Ok(r) => match r.snapshot {
                                Some(rendered) => snapshot(&name, rendered),
                                None => Ok(()),
                            },
                        }
                    }));
                }
            }
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if compiled {
        eprint!("{}", remora::testing::compiled_coverage());
    }
    conclusion.exit();
}

/// The rendered diagnostics of a case that expects errors, as an insta
/// snapshot in tests/snapshots.
fn snapshot(case: &str, rendered: String) -> Result<(), Failed> {
    let name = case.replace(['/', ':', '.'], "_");
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        settings.bind(|| insta::assert_snapshot!(name, rendered));
    }));
    if outcome.is_err() {
        return Err("snapshot differs (cargo insta review)".into());
    }
    Ok(())
}

/// The Markdown documents a reader of a fresh clone meets: those at the
/// root, in docs/ and in fuzz/.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs = Vec::new();
    for dir in [root.to_path_buf(), root.join("docs"), root.join("fuzz")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "md") && path.is_file() {
                docs.push(path);
            }
        }
    }
    docs.sort();
    docs
}

/// Every relative link of the document (`[text](target)` or
/// `[label]: target`) names a file or folder inside the repository, and
/// nothing points into `../shared`, which a clone does not have. Links with
/// a scheme (`https:`) and anchors (`#…`) are left alone.
fn links_stay_inside(root: &Path, doc: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(doc).map_err(|e| format!("cannot read: {e}"))?;
    let dir = doc.parent().unwrap_or(root);
    let mut wrong = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.contains("../shared") {
            wrong.push(format!("line {}: points into ../shared", n + 1));
        }
        for target in link_targets(line) {
            let target = target.split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            match inside(root, &dir.join(target)) {
                None => wrong.push(format!("line {}: `{target}` leaves the repository", n + 1)),
                Some(path) if !path.exists() => {
                    wrong.push(format!("line {}: `{target}` does not exist", n + 1))
                }
                Some(_) => {}
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

/// The targets of the links on one line: `](target)` and a reference
/// definition `[label]: target`.
fn link_targets(line: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        targets.push(rest[..end].split_whitespace().next().unwrap_or(""));
        rest = &rest[end..];
    }
    let trimmed = line.trim_start();
    if trimmed.starts_with('[')
        && let Some(at) = trimmed.find("]: ")
    {
        targets.push(trimmed[at + 3..].split_whitespace().next().unwrap_or(""));
    }
    targets
}

/// `path` with `.` and `..` resolved by its components, if it stays under
/// `root`.
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut resolved = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                if !resolved.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => resolved.push(other),
        }
    }
    resolved.starts_with(root).then_some(resolved)
}
