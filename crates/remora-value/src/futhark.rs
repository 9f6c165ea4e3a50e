//! Futhark's data formats, for `input @ file` / `output @ file` in test
//! blocks (core.md §5.1) and data arguments (extensions.md §5): a sequence
//! of values, each textual (`2i64`, `[1.0f32, 2.0f32]`, `true`,
//! `empty([0]i64)`) or binary (`b`, version 2, rank, a 4-byte type such as
//! `" i64"`, rank × u64 dimensions, little-endian data). Element types
//! i64 → Int, f32 → Float, bool → Bool; others are errors.

use crate::read::stack;
use crate::{Array, Data};

/// Every value in a data file.
pub fn read_data(bytes: &[u8]) -> Result<Vec<Array>, String> {
    let mut r = Reader {
        bytes,
        pos: 0,
        depth: 0,
    };
    let mut out = Vec::new();
    loop {
        r.skip_space();
        if r.pos >= bytes.len() {
            return Ok(out);
        }
        if bytes[r.pos] == b'b' && bytes.get(r.pos + 1) == Some(&2) {
            out.push(r.binary()?);
        } else {
            out.push(r.text_value()?);
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

/// Deepest `[` nesting a textual value may have (ranks are small; this only
/// keeps hostile input from exhausting the stack).
const MAX_RANK: usize = 1_000;

#[derive(Clone, Copy, PartialEq)]
enum Elem {
    I64,
    F32,
    Bool,
}

impl Reader<'_> {
    fn skip_space(&mut self) {
        while let Some(&c) = self.bytes.get(self.pos) {
            if c.is_ascii_whitespace() || c == b',' {
                self.pos += 1;
            } else if c == b'-' && self.bytes.get(self.pos + 1) == Some(&b'-') {
                while self.bytes.get(self.pos).is_some_and(|&c| c != b'\n') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("byte {}: {what}", self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.pos + n;
        let Some(s) = self.bytes.get(self.pos..end) else {
            return self.err("unexpected end of data");
        };
        self.pos = end;
        Ok(s)
    }

    fn binary(&mut self) -> Result<Array, String> {
        self.pos += 2; // 'b' and version 2
        let rank = usize::from(self.take(1)?[0]);
        let elem = match self.take(4)? {
            b" i64" => Elem::I64,
            b" f32" => Elem::F32,
            b"bool" => Elem::Bool,
            other => {
                return Err(format!(
                    "unsupported element type {:?}",
                    String::from_utf8_lossy(other)
                ));
            }
        };
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            let d = u64::from_le_bytes(
                self.take(8)?
                    .try_into()
                    .map_err(|_| "bad dimension".to_string())?,
            );
            shape.push(usize::try_from(d).map_err(|_| "dimension too large".to_string())?);
        }
        let n = crate::data_atoms(&shape)?;
        let data = match elem {
            Elem::I64 => Data::Int(
                self.take(n.checked_mul(8).ok_or("array too large")?)?
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect(),
            ),
            Elem::F32 => Data::Float(
                self.take(n.checked_mul(4).ok_or("array too large")?)?
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            Elem::Bool => Data::Bool(self.take(n)?.iter().map(|&b| b != 0).collect()),
        };
        Ok(Array { shape, data })
    }

    fn word(&mut self) -> &str {
        let start = self.pos;
        while self
            .bytes
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+' | b'_'))
        {
            self.pos += 1;
        }
        std::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or("")
    }

    fn text_value(&mut self) -> Result<Array, String> {
        self.skip_space();
        match self.bytes.get(self.pos) {
            Some(b'[') => {
                if self.depth >= MAX_RANK {
                    return self.err("value nested too deeply");
                }
                self.pos += 1;
                self.depth += 1;
                let mut elems = Vec::new();
                loop {
                    self.skip_space();
                    if self.bytes.get(self.pos) == Some(&b']') {
                        self.pos += 1;
                        self.depth -= 1;
                        break;
                    }
                    if self.pos >= self.bytes.len() {
                        return self.err("unclosed `[`");
                    }
                    elems.push(self.text_value()?);
                }
                if elems.is_empty() {
                    return self.err("`[]` has no element type: write empty([0]i64)");
                }
                stack(elems)
            }
            Some(_) => {
                let w = self.word().to_string();
                if w == "empty" {
                    return self.empty();
                }
                scalar(&w).or_else(|e| self.err(&e))
            }
            None => self.err("unexpected end of data"),
        }
    }

    /// `empty([d]…t)`.
    fn empty(&mut self) -> Result<Array, String> {
        if self.take(1)? != b"(" {
            return self.err("expected `(` after empty");
        }
        let mut shape = Vec::new();
        while self.bytes.get(self.pos) == Some(&b'[') {
            self.pos += 1;
            let d = self.word().to_string();
            shape.push(d.parse::<usize>().map_err(|_| format!("bad dimension `{d}`"))?);
            if self.take(1)? != b"]" {
                return self.err("expected `]`");
            }
        }
        let data = match self.word() {
            "i64" => Data::Int(Vec::new().into()),
            "f32" => Data::Float(Vec::new().into()),
            "bool" => Data::Bool(Vec::new().into()),
            t => return Err(format!("unsupported element type `{t}`")),
        };
        if self.take(1)? != b")" {
            return self.err("expected `)`");
        }
        crate::data_atoms(&shape).or_else(|e| self.err(&e))?;
        if !shape.contains(&0) {
            return self.err("an empty array needs a zero dimension");
        }
        Ok(Array { shape, data })
    }
}

/// `2i64`, `1.5f32`, `true`, `f32.nan`, `-f32.inf`.
fn scalar(w: &str) -> Result<Array, String> {
    let one = |data| {
        Ok(Array {
            shape: Vec::new(),
            data,
        })
    };
    match w {
        "true" => return one(Data::Bool(vec![true].into())),
        "false" => return one(Data::Bool(vec![false].into())),
        "f32.nan" => return one(Data::Float(vec![f32::NAN].into())),
        "f32.inf" => return one(Data::Float(vec![f32::INFINITY].into())),
        "-f32.inf" => return one(Data::Float(vec![f32::NEG_INFINITY].into())),
        _ => {}
    }
    if let Some(n) = w.strip_suffix("i64") {
        return n
            .parse::<i64>()
            .map_err(|_| format!("bad i64 `{w}`"))
            .and_then(|n| one(Data::Int(vec![n].into())));
    }
    if let Some(x) = w.strip_suffix("f32") {
        return x
            .parse::<f32>()
            .map_err(|_| format!("bad f32 `{w}`"))
            .and_then(|x| one(Data::Float(vec![x].into())));
    }
    Err(format!(
        "unsupported value `{w}` (Int is i64, Float f32, Bool bool)"
    ))
}

/// A value in Futhark's textual format: `[[1i64, 2i64], [3i64, 4i64]]`,
/// `1.5f32`, `true`, `empty([0][3]i64)`. Boxes and functions have no data
/// form.
pub fn write_text<F>(a: &Array<F>) -> Result<String, String> {
    let (elem, atoms): (&str, Vec<String>) = match &a.data {
        Data::Int(v) => ("i64", v.iter().map(|n| format!("{n}i64")).collect()),
        Data::Float(v) => ("f32", v.iter().map(|x| float_text(*x)).collect()),
        Data::Bool(v) => ("bool", v.iter().map(|b| b.to_string()).collect()),
        Data::Atoms(_) | Data::Records(_) => return Err("a box, record or function has no data form".into()),
    };
    if atoms.is_empty() && !a.shape.is_empty() {
        let dims: String = a.shape.iter().map(|d| format!("[{d}]")).collect();
        return Ok(format!("empty({dims}{elem})"));
    }
    // The number of atoms in a cell of each rank, computed once (a value
    // of many axes would otherwise cost rank² here).
    let mut cells = vec![1usize; a.shape.len() + 1];
    for k in (0..a.shape.len()).rev() {
        cells[k] = cells[k + 1].saturating_mul(a.shape[k]);
    }
    let mut out = String::new();
    nest(&mut out, &a.shape, &cells[1..], &atoms);
    Ok(out)
}

/// `atoms` laid out in `shape`; `cells[k]` is the size of a cell below
/// axis `k`.
fn nest(out: &mut String, shape: &[usize], cells: &[usize], atoms: &[String]) {
    let (Some((&n, rest)), Some((&size, inner))) = (shape.split_first(), cells.split_first()) else {
        out.push_str(atoms.first().map_or("", |s| s));
        return;
    };
    out.push('[');
    for i in 0..n {
        if i > 0 {
            out.push_str(", ");
        }
        nest(out, rest, inner, &atoms[i * size..(i + 1) * size]);
    }
    out.push(']');
}

fn float_text(x: f32) -> String {
    if x.is_nan() {
        "f32.nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "f32.inf" } else { "-f32.inf" }.into()
    } else {
        // Rust's shortest round-trip form, which Futhark reads.
        format!("{x:?}f32")
    }
}

/// A value in Futhark's binary format (version 2, little-endian).
pub fn write_binary<F>(a: &Array<F>) -> Result<Vec<u8>, String> {
    let rank = u8::try_from(a.shape.len()).map_err(|_| "rank above 255".to_string())?;
    let mut out = vec![b'b', 2, rank];
    out.extend_from_slice(match &a.data {
        Data::Int(_) => b" i64",
        Data::Float(_) => b" f32",
        Data::Bool(_) => b"bool",
        Data::Atoms(_) | Data::Records(_) => return Err("a box, record or function has no data form".into()),
    });
    for d in &a.shape {
        out.extend_from_slice(&(*d as u64).to_le_bytes());
    }
    a.data.write_le(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print::to_string;

    fn shown(bytes: &[u8]) -> Vec<String> {
        match read_data(bytes) {
            Ok(vs) => vs.iter().map(to_string).collect(),
            Err(e) => vec![format!("error: {e}")],
        }
    }

    #[test]
    fn textual() {
        assert_eq!(shown(b"2i64 3i64"), ["2", "3"]);
        assert_eq!(shown(b"[[1i64, 2i64], [3i64, 4i64]]"), ["[[1 2] [3 4]]"]);
        assert_eq!(
            shown(b"[1.0f32, 2.5f32] true -- a comment\n false"),
            ["[1.0 2.5]", "#t", "#f"]
        );
        assert_eq!(shown(b"empty([0]i64) empty([2][0]f32)"), ["[]", "[[] []]"]);
        assert!(read_data(b"2i32").is_err());
        assert!(read_data(b"[1i64, 2.0f32]").is_err());
        assert!(read_data("[".repeat(100_000).as_bytes()).is_err());
    }

    #[test]
    fn binary() {
        // Two [3]f32 vectors, as core.md's dot-binary.in.
        let mut bytes = Vec::new();
        for v in [[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]] {
            bytes.extend(b"b\x02\x01 f32");
            bytes.extend(3u64.to_le_bytes());
            for x in v {
                bytes.extend(x.to_le_bytes());
            }
        }
        assert_eq!(shown(&bytes), ["[1.0 2.0 3.0]", "[4.0 5.0 6.0]"]);
        let mut ints = b"b\x02\x00 i64".to_vec();
        ints.extend(7i64.to_le_bytes());
        assert_eq!(shown(&ints), ["7"]);
        assert!(read_data(b"b\x02\x01 f32\x03").is_err());
    }

    #[test]
    fn written_values_read_back() {
        let values = [
            "[[1i64, -2i64], [3i64, 4i64]]",
            "[1.5f32, -0.0f32, f32.nan, -f32.inf, 1e-8f32]",
            "true",
            "empty([0][3]i64)",
        ];
        for text in values {
            let read = read_data(text.as_bytes());
            assert!(matches!(read.as_deref(), Ok([_])), "{text}: {read:?}");
            let Ok([v]) = read.as_deref() else { continue };
            let again = write_text(v).map(|t| shown(t.as_bytes()));
            assert_eq!(again, Ok(vec![to_string(v)]), "{text}");
            let again = write_binary(v).map(|b| shown(&b));
            assert_eq!(again, Ok(vec![to_string(v)]), "{text}");
        }
        assert_eq!(
            read_data(b"[[1i64, 2i64]]").map(|v| write_text(&v[0])),
            Ok(Ok("[[1i64, 2i64]]".to_string()))
        );
    }
}
