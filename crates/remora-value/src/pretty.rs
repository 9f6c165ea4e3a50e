//! Printing values for people (`remora run --format pretty`, the REPL),
//! beside the exact printer of `print.rs` (core.md §4.1), which
//! conformance needs and which this module leaves alone.
//!
//! * Scalars bare; floats in the shortest form that reads back as the
//!   same f32 (`0.09003057`, `9.0`), in exponent notation (`1.0e-5`,
//!   `1.5e9`) only outside `1e-4 ≤ |x| < 1e8`; Booleans `#t`/`#f`.
//! * Arrays in NumPy's layout with Remora's brackets: a vector on one
//!   line, a matrix as a grid of rows with right-aligned columns (each
//!   column as wide as its widest number, as J does), and each higher axis
//!   as blocks of grids separated by blank lines (one more per axis, as
//!   NumPy does). An array printed whole reads back as the same value.
//! * An array with more than [`Options::threshold`] items (1,000, as in
//!   NumPy) shows only its first and last [`Options::edge`] (3) items
//!   along each longer axis, with `…` for the rest; [`Options::FULL`]
//!   shows everything.
//! * A box as `(box W… PAYLOAD)` with the payload laid out as above (its
//!   lines aligned under its first), a record as `{x = 1, y = [1 2]}` (a
//!   field whose value takes several lines puts the next field on a line
//!   of its own), functions as `#<fun>`.

use crate::{Atom, Callable, Data, Witness};
use std::fmt::Write;

/// How much of an array is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// An array with more items than this is elided.
    pub threshold: usize,
    /// How many items an elided axis shows at each end.
    pub edge: usize,
}

impl Options {
    /// NumPy's defaults: past 1,000 items, the first and last 3 per axis.
    pub const ELIDED: Options = Options {
        threshold: 1000,
        edge: 3,
    };
    /// Every item.
    pub const FULL: Options = Options {
        threshold: usize::MAX,
        edge: 3,
    };
}

impl Default for Options {
    fn default() -> Options {
        Options::ELIDED
    }
}

/// The printed form (no trailing newline).
pub fn to_string<F: Callable + Clone>(a: &crate::Array<F>, options: &Options) -> String {
    let mut out = Out::new(usize::MAX);
    write_array(&mut out, &a.shape, &a.data, 0, options);
    out.text
}

/// The printed form, unless it would be longer than `cap` bytes: then an
/// error saying so, after work proportional to `cap`.
pub fn to_string_within<F: Callable + Clone>(
    a: &crate::Array<F>,
    options: &Options,
    cap: usize,
) -> Result<String, String> {
    let mut out = Out::new(cap);
    write_array(&mut out, &a.shape, &a.data, 0, options);
    if out.full() {
        let dims: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
        return Err(format!(
            "the printed form of this array of shape [{}] is too long (over {cap} bytes)",
            dims.join(" ")
        ));
    }
    Ok(out.text)
}

/// The printed form within the text limit the memory available allows
/// (`limits::text_limit`).
pub fn to_string_checked<F: Callable + Clone>(
    a: &crate::Array<F>,
    options: &Options,
) -> Result<String, String> {
    to_string_within(a, options, crate::limits::text_limit())
}

/// A float as people read it: the shortest digits that read back as the
/// same f32 (Rust's `{}`), always with a point (`9.0`, not `9`), in
/// exponent notation (`1.0e-5`, `2.5e10`) outside `1e-4 ≤ |x| < 1e8`,
/// where NumPy switches too; `NaN`, `Infinity`, `-Infinity` as Remora
/// prints them.
pub fn format_float(x: f32) -> String {
    if !x.is_finite() {
        return remora_syntax::float::format_float(x);
    }
    let magnitude = x.abs();
    if magnitude == 0.0 || (1e-4..1e8).contains(&magnitude) {
        let s = format!("{x}");
        if s.contains('.') { s } else { s + ".0" }
    } else {
        let s = format!("{x:e}");
        match s.split_once('e') {
            Some((mantissa, exponent)) if !mantissa.contains('.') => format!("{mantissa}.0e{exponent}"),
            _ => s,
        }
    }
}

/// The text written so far, the column it ends at and how many lines it
/// has, stopping (as far as a caller checks [`Out::full`]) past `cap`
/// bytes.
struct Out {
    text: String,
    /// Characters since the last newline: where a nested array starts,
    /// which its later lines align with.
    column: usize,
    lines: usize,
    cap: usize,
}

impl Out {
    fn new(cap: usize) -> Out {
        Out {
            text: String::new(),
            column: 0,
            lines: 0,
            cap,
        }
    }

    fn full(&self) -> bool {
        self.text.len() > self.cap
    }

    /// Text without newlines.
    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.column += s.chars().count();
    }

    fn push_char(&mut self, c: char) {
        self.text.push(c);
        self.column += 1;
    }

    /// `s` right-aligned in a field of `width` characters.
    fn push_padded(&mut self, s: &str, width: usize) {
        let pad = width.saturating_sub(s.chars().count());
        for _ in 0..pad {
            self.text.push(' ');
        }
        self.column += pad;
        self.push(s);
    }

    /// `blank` empty lines, then a new line indented by `indent`.
    fn new_line(&mut self, blank: usize, indent: usize) {
        for _ in 0..=blank {
            self.text.push('\n');
        }
        for _ in 0..indent {
            self.text.push(' ');
        }
        self.lines += blank + 1;
        self.column = indent;
    }
}

/// The positions an axis of `n` items shows: all of them, or (elided) the
/// first and last `edge` with a gap between.
#[derive(Clone, Copy)]
struct Shown {
    n: usize,
    /// `Some(edge)` when elided.
    edge: Option<usize>,
}

impl Shown {
    fn new(n: usize, elide: bool, edge: usize) -> Shown {
        let elided = elide && n > edge.saturating_mul(2);
        Shown {
            n,
            edge: elided.then_some(edge),
        }
    }

    /// How many items (the gap is one).
    fn len(self) -> usize {
        match self.edge {
            Some(e) => 2 * e + 1,
            None => self.n,
        }
    }

    /// The position of the `j`-th item shown, `None` for the gap.
    fn get(self, j: usize) -> Option<usize> {
        match self.edge {
            Some(e) if j == e => None,
            Some(e) if j > e => Some(self.n - e + (j - e - 1)),
            _ => Some(j),
        }
    }
}

/// An array of shape `shape` whose atoms start at `offset` in `data`.
struct Layout<'a, F> {
    shape: &'a [usize],
    /// Each axis's step in atoms.
    steps: Vec<usize>,
    data: &'a Data<F>,
    /// The positions each axis shows.
    shown: Vec<Shown>,
    /// For numbers and Booleans, the width of each shown column of the last
    /// axis (right-aligned); other atoms are written as they come.
    widths: Option<Vec<usize>>,
    /// The column of the opening bracket.
    base: usize,
}

fn write_array<F: Callable + Clone>(
    out: &mut Out,
    shape: &[usize],
    data: &Data<F>,
    offset: usize,
    options: &Options,
) {
    if shape.is_empty() {
        write_atom(out, data, offset, options);
        return;
    }
    // Positions, not atoms: an array of shape [2^40 0] has no atoms but
    // would print 2^40 `[]`s.
    let positions = shape
        .iter()
        .filter(|d| **d != 0)
        .fold(1usize, |a, d| a.saturating_mul(*d));
    let elide = positions > options.threshold;
    let mut steps = vec![1usize; shape.len()];
    for k in (1..shape.len()).rev() {
        steps[k - 1] = steps[k].saturating_mul(shape[k]);
    }
    let shown: Vec<Shown> = shape
        .iter()
        .map(|&n| Shown::new(n, elide, options.edge))
        .collect();
    let mut layout = Layout {
        shape,
        steps,
        data,
        shown,
        widths: None,
        base: out.column,
    };
    // (Measured only when there are atoms: then the last axis is no
    // longer than the buffer.)
    if matches!(data, Data::Int(_) | Data::Float(_) | Data::Bool(_)) && !shape.contains(&0) {
        let columns = layout.shown.last().map_or(0, |s| s.len());
        let mut widths = vec![0usize; columns];
        measure(&layout, 0, offset, &mut widths);
        layout.widths = Some(widths);
    }
    write_axis(out, &layout, 0, offset, options);
}

/// The widest atom of each shown column of the last axis, over the shown
/// rows of the cell of axis `k` at `offset`.
fn measure<F>(layout: &Layout<'_, F>, k: usize, offset: usize, widths: &mut [usize]) {
    let (Some(shown), Some(&step)) = (layout.shown.get(k), layout.steps.get(k)) else {
        return;
    };
    let last = k + 1 == layout.shape.len();
    for j in 0..shown.len() {
        let at = shown
            .get(j)
            .map(|i| offset.saturating_add(i.saturating_mul(step)));
        if last {
            let width = match at {
                Some(at) => number_text(layout.data, at).chars().count(),
                None => 1,
            };
            if let Some(w) = widths.get_mut(j) {
                *w = (*w).max(width);
            }
        } else if let Some(at) = at {
            measure(layout, k + 1, at, widths);
        }
    }
}

/// A number or Boolean atom's text.
fn number_text<F>(data: &Data<F>, i: usize) -> String {
    match data {
        Data::Int(v) => v.get(i).map_or_else(|| "?".into(), |n| n.to_string()),
        Data::Float(v) => v.get(i).map_or_else(|| "?".into(), |x| format_float(*x)),
        Data::Bool(v) => match v.get(i) {
            Some(true) => "#t".into(),
            Some(false) => "#f".into(),
            None => "?".into(),
        },
        Data::Atoms(_) | Data::Records(_) => "?".into(),
    }
}

/// Axis `k` of the cell at `offset`: its items within brackets.
fn write_axis<F: Callable + Clone>(
    out: &mut Out,
    layout: &Layout<'_, F>,
    k: usize,
    offset: usize,
    options: &Options,
) {
    let (Some(shown), Some(&step)) = (layout.shown.get(k), layout.steps.get(k)) else {
        return;
    };
    let rank = layout.shape.len();
    let last = k + 1 == rank;
    out.push_char('[');
    // The line count after the previous item: an atom that took several
    // lines puts the next one on a line of its own.
    let mut lines_before = out.lines;
    for j in 0..shown.len() {
        if out.full() {
            return;
        }
        if j > 0 {
            if !last {
                // Rows on lines of their own; one blank line more for each
                // axis further out.
                out.new_line(rank - k - 2, layout.base + k + 1);
            } else if out.lines != lines_before {
                out.new_line(0, layout.base + k + 1);
            } else {
                out.push_char(' ');
            }
        }
        lines_before = out.lines;
        let at = shown
            .get(j)
            .map(|i| offset.saturating_add(i.saturating_mul(step)));
        match (at, &layout.widths) {
            (None, Some(widths)) => out.push_padded("…", widths.get(j).copied().unwrap_or(1)),
            (None, None) => out.push("…"),
            (Some(at), _) if !last => write_axis(out, layout, k + 1, at, options),
            (Some(at), Some(widths)) => {
                out.push_padded(&number_text(layout.data, at), widths.get(j).copied().unwrap_or(0));
            }
            (Some(at), None) => write_atom(out, layout.data, at, options),
        }
    }
    out.push_char(']');
}

fn write_atom<F: Callable + Clone>(out: &mut Out, data: &Data<F>, i: usize, options: &Options) {
    match data {
        Data::Int(_) | Data::Float(_) | Data::Bool(_) => out.push(&number_text(data, i)),
        Data::Atoms(v) => match v.get(i) {
            Some(Atom::Fun(f)) => out.push(f.printed()),
            Some(Atom::Box(b)) => {
                out.push("(box");
                for w in &b.witnesses {
                    out.push_char(' ');
                    match w {
                        Witness::Dim(d) => out.push(&d.to_string()),
                        Witness::Shape(s) => {
                            // As the exact printer writes a shape witness.
                            let mut text = String::from("[");
                            for (k, d) in s.iter().enumerate() {
                                if k > 0 {
                                    text.push_str(", ");
                                }
                                let _ = write!(text, "{d}");
                            }
                            text.push(']');
                            out.push(&text);
                        }
                    }
                }
                out.push_char(' ');
                write_array(out, &b.payload.shape, &b.payload.data, 0, options);
                out.push_char(')');
            }
            Some(Atom::Record(fields)) => write_record(
                out,
                fields
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.shape.as_slice(), &value.data, 0)),
                options,
            ),
            None => out.push_char('?'),
        },
        // Each field's cell read where it lies.
        Data::Records(r) if i < r.count => write_record(
            out,
            r.fields.iter().map(|f| {
                (
                    f.name.as_str(),
                    f.cell.as_slice(),
                    &f.data,
                    i.saturating_mul(f.size()),
                )
            }),
            options,
        ),
        Data::Records(_) => out.push_char('?'),
    }
}

/// `{name = value, …}`, each field given as its name and its array (a
/// shape, a buffer and where in it the array starts).
fn write_record<'a, F: Callable + Clone + 'a>(
    out: &mut Out,
    fields: impl Iterator<Item = (&'a str, &'a [usize], &'a Data<F>, usize)>,
    options: &Options,
) {
    let base = out.column;
    out.push_char('{');
    let mut lines_before = out.lines;
    for (k, (name, shape, data, offset)) in fields.enumerate() {
        if out.full() {
            return;
        }
        if k > 0 {
            out.push_char(',');
            if out.lines != lines_before {
                out.new_line(0, base + 1);
            } else {
                out.push_char(' ');
            }
        }
        lines_before = out.lines;
        out.push(name);
        out.push(" = ");
        write_array(out, shape, data, offset, options);
    }
    out.push_char('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Array, Boxed, NoFun, RecordField, Records};

    fn ints(shape: &[usize], v: &[i64]) -> Array {
        Array {
            shape: shape.to_vec(),
            data: Data::Int(v.to_vec().into()),
        }
    }

    fn iota(shape: &[usize]) -> Array {
        let n: usize = shape.iter().product();
        Array {
            shape: shape.to_vec(),
            data: Data::Int((0..n as i64).collect()),
        }
    }

    fn floats(shape: &[usize], v: &[f32]) -> Array {
        Array {
            shape: shape.to_vec(),
            data: Data::Float(v.to_vec().into()),
        }
    }

    fn boxed(witnesses: Vec<Witness>, payload: Array) -> Array {
        Array {
            shape: vec![],
            data: Data::Atoms(vec![Atom::Box(Boxed { witnesses, payload })].into()),
        }
    }

    fn show(a: &Array) -> String {
        to_string(a, &Options::ELIDED)
    }

    #[test]
    fn floats_in_their_shortest_form() {
        assert_eq!(format_float(0.09003057), "0.09003057");
        assert_eq!(format_float(9.0), "9.0");
        assert_eq!(format_float(-0.0), "-0.0");
        assert_eq!(format_float(0.0), "0.0");
        assert_eq!(format_float(2.5), "2.5");
        assert_eq!(format_float(1e-4), "0.0001");
        assert_eq!(format_float(1.5e-5), "1.5e-5");
        assert_eq!(format_float(12345678.0), "12345678.0");
        assert_eq!(format_float(1e8), "1.0e8");
        assert_eq!(format_float(-2.5e10), "-2.5e10");
        assert_eq!(format_float(f32::MAX), "3.4028235e38");
        assert_eq!(format_float(f32::NAN), "NaN");
        assert_eq!(format_float(f32::INFINITY), "Infinity");
        assert_eq!(format_float(f32::NEG_INFINITY), "-Infinity");
        // Each reads back as the same float.
        for x in [
            0.09003057f32,
            0.1,
            1.0 / 3.0,
            1.5e-5,
            2.5e10,
            f32::MIN_POSITIVE,
            16777217.0,
        ] {
            assert_eq!(format_float(x).parse::<f32>(), Ok(x), "{x}");
        }
    }

    #[test]
    fn scalars_and_vectors_on_one_line() {
        assert_eq!(show(&ints(&[], &[17])), "17");
        assert_eq!(show(&ints(&[3], &[1, -20, 300])), "[1 -20 300]");
        assert_eq!(show(&ints(&[0], &[])), "[]");
        assert_eq!(
            show(&floats(&[3], &[0.5, 9.0, 0.09003057])),
            "[0.5 9.0 0.09003057]"
        );
        let bools: Array = Array {
            shape: vec![3],
            data: Data::Bool(vec![true, false, true].into()),
        };
        assert_eq!(show(&bools), "[#t #f #t]");
    }

    #[test]
    fn matrices_as_grids_with_right_aligned_columns() {
        assert_eq!(
            show(&ints(&[2, 3], &[1, 200, 3, 40, 5, -6])),
            "[[ 1 200  3]\n [40   5 -6]]"
        );
        assert_eq!(
            show(&floats(&[2, 2], &[1.5, 10.0, -2.0, 0.25])),
            "[[ 1.5 10.0]\n [-2.0 0.25]]"
        );
        assert_eq!(show(&ints(&[1, 3], &[1, 2, 3])), "[[1 2 3]]");
        assert_eq!(show(&ints(&[2, 0], &[])), "[[]\n []]");
        assert_eq!(show(&ints(&[0, 2], &[])), "[]");
    }

    #[test]
    fn higher_ranks_as_blocks_separated_by_blank_lines() {
        assert_eq!(show(&iota(&[2, 2, 2])), "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]");
        // Rank 4: two blank lines between the outermost blocks.
        assert_eq!(show(&iota(&[2, 1, 1, 2])), "[[[[0 1]]]\n\n\n [[[2 3]]]]");
        // Columns align across blocks.
        assert_eq!(
            show(&ints(&[2, 1, 2], &[1, 2, 300, 4])),
            "[[[  1 2]]\n\n [[300 4]]]"
        );
    }

    #[test]
    fn long_arrays_are_elided_unless_asked() {
        assert!(!show(&iota(&[1000])).contains('…'));
        assert_eq!(show(&iota(&[1001])), "[0 1 2 … 998 999 1000]");
        assert_eq!(
            show(&iota(&[100, 100])),
            "[[   0    1    2 …   97   98   99]\n \
             [ 100  101  102 …  197  198  199]\n \
             [ 200  201  202 …  297  298  299]\n \
             …\n \
             [9700 9701 9702 … 9797 9798 9799]\n \
             [9800 9801 9802 … 9897 9898 9899]\n \
             [9900 9901 9902 … 9997 9998 9999]]"
        );
        let full = to_string(&iota(&[1001]), &Options::FULL);
        assert!(full.starts_with("[0 1 2 3 4 5 6"), "{full}");
        assert!(full.ends_with(" 999 1000]"), "{full}");
        assert!(!full.contains('…'));
        // An axis of 2^40 empty rows: elided, not 2^40 lines.
        let empty_rows = ints(&[1 << 40, 0], &[]);
        assert_eq!(show(&empty_rows), "[[]\n []\n []\n …\n []\n []\n []]");
        assert!(to_string_within(&empty_rows, &Options::FULL, 1000).is_err());
    }

    #[test]
    fn boxes_show_their_contents() {
        assert_eq!(
            show(&boxed(vec![Witness::Dim(3)], ints(&[3], &[1, 2, 3]))),
            "(box 3 [1 2 3])"
        );
        assert_eq!(
            show(&boxed(
                vec![Witness::Shape(vec![2, 2])],
                ints(&[2, 2], &[1, 2, 30, 4])
            )),
            "(box [2, 2] [[ 1 2]\n             [30 4]])"
        );
        let nested = boxed(
            vec![Witness::Dim(1)],
            boxed(vec![Witness::Dim(2)], ints(&[], &[100])),
        );
        assert_eq!(show(&nested), "(box 1 (box 2 100))");
        // A vector of boxes: one that takes several lines puts the next on
        // a line of its own.
        let items = vec![
            Atom::Box(Boxed {
                witnesses: vec![Witness::Dim(1)],
                payload: ints(&[1], &[7]),
            }),
            Atom::Box(Boxed {
                witnesses: vec![Witness::Dim(2)],
                payload: ints(&[2, 1], &[8, 9]),
            }),
            Atom::Box(Boxed {
                witnesses: vec![Witness::Dim(0)],
                payload: ints(&[0], &[]),
            }),
        ];
        let frame: Array = Array {
            shape: vec![3],
            data: Data::Atoms(items.into()),
        };
        assert_eq!(
            show(&frame),
            "[(box 1 [7]) (box 2 [[8]\n                     [9]])\n (box 0 [])]"
        );
    }

    #[test]
    fn records_as_fields() {
        let record: Array<NoFun> = Array {
            shape: vec![],
            data: Data::Atoms(
                vec![Atom::Record(vec![
                    ("x".into(), ints(&[], &[0])),
                    ("ys".into(), floats(&[2], &[0.5, 2.0])),
                ])]
                .into(),
            ),
        };
        assert_eq!(show(&record), "{x = 0, ys = [0.5 2.0]}");
        let tall: Array<NoFun> = Array {
            shape: vec![],
            data: Data::Atoms(
                vec![Atom::Record(vec![
                    ("m".into(), ints(&[2, 2], &[1, 2, 3, 4])),
                    ("n".into(), ints(&[], &[5])),
                ])]
                .into(),
            ),
        };
        assert_eq!(show(&tall), "{m = [[1 2]\n      [3 4]],\n n = 5}");
        // A frame of records held as one buffer per field.
        let frame: Array<NoFun> = Array {
            shape: vec![2],
            data: Data::records(Records {
                count: 2,
                fields: vec![
                    RecordField {
                        name: "c".into(),
                        cell: vec![2],
                        data: Data::Int(vec![1, 2, 3, 4].into()),
                    },
                    RecordField {
                        name: "n".into(),
                        cell: vec![],
                        data: Data::Bool(vec![true, false].into()),
                    },
                ],
            }),
        };
        assert_eq!(show(&frame), "[{c = [1 2], n = #t} {c = [3 4], n = #f}]");
    }

    #[test]
    fn a_whole_array_reads_back_as_the_same_value() {
        let a = floats(
            &[2, 2, 3],
            &[
                1.0, -0.5, 0.09003057, 2.0, 1e-6, 3e9, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0,
            ],
        );
        let text = show(&a);
        assert_eq!(crate::read::read_value(&text).ok(), Some(a), "{text}");
    }
}
