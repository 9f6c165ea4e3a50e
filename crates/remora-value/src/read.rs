//! Reading values in the syntax of test blocks and command-line data
//! (core.md §5.1): `#t #f`, Int and Float literals (the language's lexical
//! rules), `[v …]` (regular; `[]` is an empty rank-1 array),
//! `(array [shape] v …)` and `(box idx … v)` with `idx` a natural or
//! `[a, b …]` (commas optional). The language's reader does the lexing.
//! Reading recurses over nesting: call it inside `remora_syntax::stack::run_deep`.

use crate::{Array, Atom, Boxed, Data, Witness};
use remora_syntax::FileId;
use remora_syntax::reader::{Bracket, SExp, SExpKind, read};

/// Every value in `text`, in order (an `input { … }` block).
pub fn read_values(text: &str) -> Result<Vec<Array>, String> {
    let mut diags = Vec::new();
    let items = read(text, FileId(0), &mut diags);
    if let Some(d) = diags.first() {
        return Err(d.message.clone());
    }
    items.iter().map(value).collect()
}

/// Exactly one value (an `output { … }` block).
pub fn read_value(text: &str) -> Result<Array, String> {
    let mut values = read_values(text)?;
    match values.len() {
        1 => values.pop().ok_or_else(|| "expected one value".to_string()),
        n => Err(format!("expected one value, found {n}")),
    }
}

fn scalar(data: Data) -> Array {
    Array {
        shape: Vec::new(),
        data,
    }
}

fn value(s: &SExp) -> Result<Array, String> {
    match &s.kind {
        SExpKind::Int { value, .. } => Ok(scalar(Data::Int(vec![*value].into()))),
        SExpKind::Float(x) => Ok(scalar(Data::Float(vec![*x].into()))),
        SExpKind::Bool(b) => Ok(scalar(Data::Bool(vec![*b].into()))),
        SExpKind::List(Bracket::Square, items) => {
            let elems: Vec<Array> = items
                .iter()
                .filter(|i| i.kind != SExpKind::Comma)
                .map(value)
                .collect::<Result<_, _>>()?;
            stack(elems)
        }
        SExpKind::List(Bracket::Paren, items) => match items.first().and_then(SExp::symbol) {
            Some("array") => array_form(&items[1..]),
            Some("box") => box_form(&items[1..]),
            _ => Err(format!("unexpected {} in a value", s.describe())),
        },
        _ => Err(format!("unexpected {} in a value", s.describe())),
    }
}

/// `[v …]`: the values stacked along a new leading axis; they must agree
/// in shape and element type. `[]` is an empty rank-1 Int array.
pub fn stack(elems: Vec<Array>) -> Result<Array, String> {
    if elems.is_empty() {
        return Ok(Array {
            shape: vec![0],
            data: Data::Int(Vec::new().into()),
        });
    }
    Array::stack(elems)
}

fn natural(s: &SExp) -> Result<usize, String> {
    match s.kind {
        SExpKind::Int { value, signed: false } if value >= 0 => {
            usize::try_from(value).map_err(|_| "dimension too large".to_string())
        }
        _ => Err(format!("expected a natural number, found {}", s.describe())),
    }
}

fn array_form(items: &[SExp]) -> Result<Array, String> {
    let Some((shape_lit, atoms)) = items.split_first() else {
        return Err("(array [shape] v …) needs a shape".into());
    };
    let Some(dims) = shape_lit.list(Bracket::Square) else {
        return Err("(array [shape] v …) needs a shape".into());
    };
    let shape: Vec<usize> = dims.iter().map(natural).collect::<Result<_, _>>()?;
    let atoms: Vec<Array> = atoms.iter().map(value).collect::<Result<_, _>>()?;
    if atoms.iter().any(|a| !a.shape.is_empty()) {
        return Err("the elements of (array …) are scalars".into());
    }
    let size: usize = shape.iter().product();
    if size != atoms.len() {
        return Err(format!(
            "(array …) of shape {shape:?} needs {size} elements, has {}",
            atoms.len()
        ));
    }
    let mut flat = stack(atoms)?;
    flat.shape = shape;
    Ok(flat)
}

fn box_form(items: &[SExp]) -> Result<Array, String> {
    let Some((payload, witnesses)) = items.split_last() else {
        return Err("(box idx … v) needs a value".into());
    };
    let witnesses: Vec<Witness> = witnesses
        .iter()
        .map(|w| match &w.kind {
            SExpKind::List(Bracket::Square, dims) => dims
                .iter()
                .filter(|d| d.kind != SExpKind::Comma)
                .map(|d| natural(d).map(|n| n as i64))
                .collect::<Result<Vec<_>, _>>()
                .map(Witness::Shape),
            _ => natural(w).map(|n| Witness::Dim(n as i64)),
        })
        .collect::<Result<_, _>>()?;
    let payload = value(payload)?;
    Ok(scalar(Data::Atoms(
        vec![Atom::Box(Boxed { witnesses, payload })].into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print::to_string;

    fn round(text: &str) -> String {
        read_value(text)
            .map(|v| to_string(&v))
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn reads_what_printing_writes() {
        for text in [
            "5",
            "-4",
            "[[1 2] [3 4]]",
            "[#t #f]",
            "[1.5 -0.0 7.403221e-2]",
            "[]",
            "[[] []]",
            "(box 1 (box 2 100))",
            "(box [2, 3] [[0 1 2] [3 4 5]])",
            "[(box 1 [5]) (box 2 [6 7])]",
            "(box [] 0)",
        ] {
            assert_eq!(round(text), text);
        }
    }

    #[test]
    fn array_form_and_equality() {
        assert_eq!(round("(array [2 2] 1 2 3 4)"), "[[1 2] [3 4]]");
        assert_eq!(round("(array [] 17)"), "17");
        assert_eq!(
            round("(box [2 3] [[0 1 2] [3 4 5]])"),
            "(box [2, 3] [[0 1 2] [3 4 5]])"
        );
        assert_eq!(read_value("[1 2]"), read_value("(array [2] 1 2)"));
        assert_eq!(read_value("0.0"), read_value("-0.0"));
        assert!(read_value("(array [0] 1)").is_err());
        assert_ne!(read_value("[1 2]"), read_value("[1.0 2.0]"));
    }

    #[test]
    fn irregular_values_are_errors() {
        assert!(read_value("[[1 2] [3]]").is_err());
        assert!(read_value("[1 #t]").is_err());
        assert!(read_value("(array [3] 1 2)").is_err());
        assert!(read_value("1 2").is_err());
        assert_eq!(read_values("1 2").map(|v| v.len()), Ok(2));
    }
}
