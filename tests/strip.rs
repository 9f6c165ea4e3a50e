//! Issue 5's experiment: every run case of the suite (tests/run,
//! tests/tutorial, examples) with every `t-app` and `i-app` removed, run
//! with inference. Prints how many give the same value, how many are
//! reported ambiguous, how many fail to check otherwise, and how many differ
//! (the smallest-frame rule chose another split), with examples. Run with
//! `cargo test --test strip -- --nocapture` to see the table.

use remora::testing::{Stripped, collect, stripped_outcome};
use remora_syntax::testblock::parse_cases;
use std::path::PathBuf;

#[test]
fn instantiations_removed() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["tests/run", "tests/tutorial", "examples"] {
        collect(&root.join(dir), &mut files);
    }
    files.sort();
    let (mut same, mut ambiguous, mut type_errors, mut differs, mut run_errors) = (0, 0, 0, 0, 0);
    let mut examples = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(cases) = parse_cases(&text, &stem) else {
            continue;
        };
        for case in cases {
            let name = format!("{rel}::{}", case.name);
            let (file, rel) = (file.clone(), rel.clone());
            let outcome = remora_syntax::stack::run_deep(move || stripped_outcome(&rel, &file, &case));
            match outcome {
                None => {}
                Some(Stripped::Same) => same += 1,
                Some(Stripped::Ambiguous(m)) => {
                    ambiguous += 1;
                    examples.push(format!("ambiguous  {name}: {m}"));
                }
                Some(Stripped::TypeError(m)) => {
                    type_errors += 1;
                    examples.push(format!("type error {name}: {m}"));
                }
                Some(Stripped::Differs(a, b)) => {
                    differs += 1;
                    examples.push(format!("differs    {name}: {a} became {b}"));
                }
                Some(Stripped::RunError(m)) => {
                    run_errors += 1;
                    examples.push(format!("run error  {name}: {m}"));
                }
            }
        }
    }
    let total = same + ambiguous + type_errors + differs + run_errors;
    println!("{total} run cases with every t-app and i-app removed:");
    println!("  {same} give the same value");
    println!("  {ambiguous} are reported ambiguous");
    println!("  {type_errors} fail to check otherwise");
    println!("  {differs} give another value");
    println!("  {run_errors} fail at run time");
    for e in &examples {
        println!("  {e}");
    }
    assert!(total > 0, "no run cases found");
    // Inference must recover most of what core makes you write.
    assert!(
        same * 2 > total,
        "only {same} of {total} stripped programs give the same value"
    );
}
