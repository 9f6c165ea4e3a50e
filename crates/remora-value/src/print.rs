//! Printing values exactly as remora-lang's `remora interpret` does
//! (core.md §4.1): one line, scalars bare, nested brackets row-major, `[]`
//! for a zero leading dimension, floats as GHC's `show`, boxes as
//! `(box W… V)` with shape witnesses as `[a, b]`, records as
//! `{x  =  v, …}`, functions as `#<fun>`.

use crate::{Array, Atom, Callable, Data, Witness};
use remora_syntax::float::format_float;
use std::fmt::Write;

pub fn to_string<F: Callable + Clone>(a: &Array<F>) -> String {
    let mut out = String::new();
    write_array(&mut out, a, usize::MAX);
    out
}

/// The printed form, unless it would be longer than `cap` bytes (an array
/// with no atoms but 2^63 rows prints 2^63 `[]`s): then an error saying
/// so, after work proportional to `cap`, not to the array's dimensions.
pub fn to_string_within<F: Callable + Clone>(a: &Array<F>, cap: usize) -> Result<String, String> {
    let mut out = String::new();
    write_array(&mut out, a, cap);
    if out.len() > cap {
        let dims: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
        return Err(format!(
            "the printed form of this array of shape [{}] is too long (over {cap} bytes)",
            dims.join(" ")
        ));
    }
    Ok(out)
}

/// The printed form within the text limit the memory available allows
/// (`limits::text_limit`).
pub fn to_string_checked<F: Callable + Clone>(a: &Array<F>) -> Result<String, String> {
    to_string_within(a, crate::limits::text_limit())
}

/// Writes `a`, stopping once `out` is longer than `cap`.
fn write_array<F: Callable + Clone>(out: &mut String, a: &Array<F>, cap: usize) {
    write_array_at(out, &a.shape, &a.data, 0, cap);
}

/// Writes the array of shape `shape` whose atoms start at `offset` in
/// `data`.
fn write_array_at<F: Callable + Clone>(
    out: &mut String,
    shape: &[usize],
    data: &Data<F>,
    offset: usize,
    cap: usize,
) {
    // Each axis's step, computed once (not once per cell: a value of rank
    // 50,000 prints in time proportional to its size).
    let mut steps = vec![1usize; shape.len()];
    for k in (1..shape.len()).rev() {
        steps[k - 1] = steps[k].saturating_mul(shape[k]);
    }
    write_cells(out, shape, &steps, data, offset, cap);
}

/// The cell of shape `shape` (with steps `steps`) that starts at atom
/// `offset`.
fn write_cells<F: Callable + Clone>(
    out: &mut String,
    shape: &[usize],
    steps: &[usize],
    data: &Data<F>,
    offset: usize,
    cap: usize,
) {
    let (Some((&n, rest)), Some((&stride, rest_steps))) = (shape.split_first(), steps.split_first()) else {
        write_atom(out, data, offset, cap);
        return;
    };
    out.push('[');
    for i in 0..n {
        if out.len() > cap {
            return;
        }
        if i > 0 {
            out.push(' ');
        }
        write_cells(
            out,
            rest,
            rest_steps,
            data,
            offset.saturating_add(i.saturating_mul(stride)),
            cap,
        );
    }
    out.push(']');
}

fn write_atom<F: Callable + Clone>(out: &mut String, data: &Data<F>, i: usize, cap: usize) {
    match data {
        Data::Int(v) => match v.get(i) {
            Some(n) => {
                let _ = write!(out, "{n}");
            }
            None => out.push('?'),
        },
        Data::Float(v) => match v.get(i) {
            Some(x) => out.push_str(&format_float(*x)),
            None => out.push('?'),
        },
        Data::Bool(v) => match v.get(i) {
            Some(b) => out.push_str(if *b { "#t" } else { "#f" }),
            None => out.push('?'),
        },
        Data::Atoms(v) => match v.get(i) {
            Some(Atom::Fun(f)) => out.push_str(f.printed()),
            Some(Atom::Box(b)) => {
                out.push_str("(box");
                for w in &b.witnesses {
                    out.push(' ');
                    match w {
                        Witness::Dim(d) => {
                            let _ = write!(out, "{d}");
                        }
                        Witness::Shape(s) => {
                            let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
                            let _ = write!(out, "[{}]", parts.join(", "));
                        }
                    }
                }
                out.push(' ');
                write_array(out, &b.payload, cap);
                out.push(')');
            }
            Some(Atom::Record(fields)) => write_record(out, fields, cap),
            None => out.push('?'),
        },
        // Each field's cell read where it lies (not sliced out: records
        // nested n deep print in time proportional to their size).
        Data::Records(r) if i < r.count => {
            out.push('{');
            for (k, f) in r.fields.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{}  =  ", f.name);
                let size: usize = f.cell.iter().product();
                write_array_at(out, &f.cell, &f.data, i.saturating_mul(size), cap);
            }
            out.push('}');
        }
        Data::Records(_) => out.push('?'),
    }
}

fn write_record<F: Callable + Clone>(out: &mut String, fields: &[(String, Array<F>)], cap: usize) {
    out.push('{');
    for (k, (name, value)) in fields.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{name}  =  ");
        write_array(out, value, cap);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Boxed, NoFun};

    fn ints(shape: &[usize], v: &[i64]) -> Array {
        Array {
            shape: shape.to_vec(),
            data: Data::Int(v.to_vec().into()),
        }
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    struct Fun;
    impl Callable for Fun {
        fn printed(&self) -> &'static str {
            "#<fun>"
        }
    }

    #[test]
    fn arrays_as_remora_lang_prints_them() {
        assert_eq!(to_string(&ints(&[], &[17])), "17");
        assert_eq!(to_string(&ints(&[2, 2], &[1, 2, 3, 4])), "[[1 2] [3 4]]");
        assert_eq!(to_string(&ints(&[0], &[])), "[]");
        assert_eq!(to_string(&ints(&[0, 2], &[])), "[]");
        assert_eq!(to_string(&ints(&[2, 0], &[])), "[[] []]");
        let floats: Array = Array {
            shape: vec![3],
            data: Data::Float(vec![9.0, -0.0, 0.07403221].into()),
        };
        assert_eq!(to_string(&floats), "[9.0 -0.0 7.403221e-2]");
        let bools: Array = Array {
            shape: vec![2],
            data: Data::Bool(vec![true, false].into()),
        };
        assert_eq!(to_string(&bools), "[#t #f]");
    }

    #[test]
    fn a_printed_form_past_its_cap_is_refused_quickly() {
        let huge = ints(&[usize::MAX / 2, 0], &[]);
        assert!(to_string_within(&huge, 1000).is_err());
        assert_eq!(
            to_string_within(&ints(&[2, 0], &[]), 1000),
            Ok("[[] []]".to_string())
        );
    }

    #[test]
    fn boxes_records_and_functions() {
        let inner: Array<NoFun> = Array {
            shape: vec![],
            data: Data::Atoms(
                vec![Atom::Box(Boxed {
                    witnesses: vec![Witness::Dim(2)],
                    payload: ints(&[], &[100]),
                })]
                .into(),
            ),
        };
        let nested: Array<NoFun> = Array {
            shape: vec![],
            data: Data::Atoms(
                vec![Atom::Box(Boxed {
                    witnesses: vec![Witness::Dim(1)],
                    payload: inner,
                })]
                .into(),
            ),
        };
        assert_eq!(to_string(&nested), "(box 1 (box 2 100))");
        let shaped: Array<NoFun> = Array {
            shape: vec![],
            data: Data::Atoms(
                vec![Atom::Box(Boxed {
                    witnesses: vec![Witness::Shape(vec![2, 3])],
                    payload: ints(&[2, 3], &[0, 1, 2, 3, 4, 5]),
                })]
                .into(),
            ),
        };
        assert_eq!(to_string(&shaped), "(box [2, 3] [[0 1 2] [3 4 5]])");
        let empty_witness: Array<NoFun> = Array {
            shape: vec![],
            data: Data::Atoms(
                vec![Atom::Box(Boxed {
                    witnesses: vec![Witness::Shape(vec![])],
                    payload: ints(&[], &[0]),
                })]
                .into(),
            ),
        };
        assert_eq!(to_string(&empty_witness), "(box [] 0)");
        let record: Array<NoFun> = Array {
            shape: vec![],
            data: Data::Atoms(
                vec![Atom::Record(vec![
                    ("x".into(), ints(&[], &[0])),
                    ("y".into(), ints(&[], &[2])),
                ])]
                .into(),
            ),
        };
        assert_eq!(to_string(&record), "{x  =  0, y  =  2}");
        let funs: Array<Fun> = Array {
            shape: vec![2],
            data: Data::Atoms(vec![Atom::Fun(Fun), Atom::Fun(Fun)].into()),
        };
        assert_eq!(to_string(&funs), "[#<fun> #<fun>]");
    }
}
