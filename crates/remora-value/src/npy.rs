//! NumPy's `.npy` format (extensions.md §5), version 1.0 written and 1.0 to
//! 3.0 read: the magic `\x93NUMPY`, a version, a header (a Python dict
//! literal with `descr`, `fortran_order` and `shape`), then the data.
//!
//! Int ↔ `<i8`, Float ↔ `<f4`, Bool ↔ `|b1`. Reading also accepts the other
//! little-endian integer types (as Int) and `<f8` (as Float, rounded), since
//! those are what NumPy makes by default; Fortran-ordered data is read into
//! row-major order.

use crate::{Array, Data};

const MAGIC: &[u8] = b"\x93NUMPY";

/// The array an `.npy` file holds.
/// What an `.npy` header says: the element type (NumPy's `descr`), the
/// shape, whether the data are in Fortran (column-major) order, and where
/// the data start.
pub struct Header {
    pub descr: String,
    pub shape: Vec<usize>,
    pub fortran: bool,
    pub data_at: usize,
}

impl Header {
    /// The kind of atom the data become: `Some("Int" | "Float" | "Bool")`,
    /// `None` for an element type that is not read.
    pub fn atom(&self) -> Option<&'static str> {
        match self.descr.as_str() {
            "<f4" | "<f8" => Some("Float"),
            "|b1" => Some("Bool"),
            "<i8" | "<i4" | "<i2" | "|i1" | "<u8" | "<u4" | "<u2" | "|u1" => Some("Int"),
            _ => None,
        }
    }
}

/// The header of an `.npy` file, from its first bytes (the data need not
/// be there: a type mismatch is found before the body is read).
pub fn read_header(bytes: &[u8]) -> Result<Header, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a NumPy .npy file (no \\x93NUMPY magic)")?;
    let (major, rest) = rest.split_first().ok_or("truncated header")?;
    let rest = rest.get(1..).ok_or("truncated header")?;
    let (len, rest) = match major {
        1 => {
            let (l, r) = rest.split_at_checked(2).ok_or("truncated header")?;
            (usize::from(u16::from_le_bytes([l[0], l[1]])), r)
        }
        2 | 3 => {
            let (l, r) = rest.split_at_checked(4).ok_or("truncated header")?;
            (u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize, r)
        }
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let (header, data) = rest.split_at_checked(len).ok_or("truncated header")?;
    let header = std::str::from_utf8(header).map_err(|_| "the header is not text")?;
    let descr = field(header, "descr").ok_or("the header has no descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"').to_string();
    let fortran = field(header, "fortran_order").ok_or("the header has no fortran_order")? == "True";
    let shape = shape_of(field(header, "shape").ok_or("the header has no shape")?)?;
    Ok(Header {
        descr,
        shape,
        fortran,
        data_at: bytes.len() - data.len(),
    })
}

pub fn read_npy(bytes: &[u8]) -> Result<Array, String> {
    let Header {
        descr,
        shape,
        fortran,
        data_at,
    } = read_header(bytes)?;
    let data = bytes.get(data_at..).unwrap_or_default();
    let descr = descr.as_str();
    let n = crate::data_atoms(&shape)?;
    let limit = crate::limits::atom_limit();
    if n > limit {
        return Err(format!(
            "an array of {n} elements is too large (the memory available allows {limit})"
        ));
    }
    let elems = |width: usize| -> Result<std::slice::ChunksExact<'_, u8>, String> {
        let bytes = n.checked_mul(width).ok_or("array too large")?;
        let d = data
            .get(..bytes)
            .ok_or_else(|| format!("the data holds fewer than {n} elements of {descr}"))?;
        Ok(d.chunks_exact(width))
    };
    let int = |width: usize, signed: bool| -> Result<Data, String> {
        elems(width)?
            .map(|c| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                if signed && c[width - 1] & 0x80 != 0 {
                    b[width..].fill(0xff);
                }
                let v = i64::from_le_bytes(b);
                if !signed && v < 0 {
                    return Err(format!(
                        "{descr} value {} does not fit an Int",
                        u64::from_le_bytes(b)
                    ));
                }
                Ok(v)
            })
            .collect::<Result<Vec<i64>, String>>()
            .map(|v| Data::Int(v.into()))
    };
    let flat = match descr {
        "<f4" => Data::Float(
            elems(4)?
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        "<f8" => Data::Float(
            elems(8)?
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32)
                .collect(),
        ),
        "|b1" => Data::Bool(elems(1)?.map(|c| c[0] != 0).collect()),
        "<i8" => int(8, true)?,
        "<i4" => int(4, true)?,
        "<i2" => int(2, true)?,
        "|i1" => int(1, true)?,
        "<u8" => int(8, false)?,
        "<u4" => int(4, false)?,
        "<u2" => int(2, false)?,
        "|u1" => int(1, false)?,
        other => {
            return Err(format!(
                "unsupported element type {other} (Int is <i8, Float <f4, Bool |b1)"
            ));
        }
    };
    let data = if fortran && shape.len() > 1 {
        row_major(&flat, &shape)
    } else {
        flat
    };
    Ok(Array { shape, data })
}

/// The text of `'key': value` in the header dict, up to the next top-level
/// comma (a shape's tuple kept whole).
fn field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = header[at + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

/// `(2, 3)`, `(5,)`, `()`.
fn shape_of(text: &str) -> Result<Vec<usize>, String> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("bad shape {text}"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| format!("bad shape {text}"))
        })
        .collect()
}

/// Column-major atoms put in row-major order: one pass over the positions
/// in row-major order, reading each from its column-major place (the
/// innermost axis a plain strided loop, the others an odometer).
fn row_major(flat: &Data, shape: &[usize]) -> Data {
    fn reorder<T: Copy>(v: &[T], shape: &[usize]) -> Vec<T> {
        let n: usize = shape.iter().product();
        let mut out = Vec::with_capacity(n);
        let Some((&inner, outer)) = shape.split_last() else {
            return v.to_vec();
        };
        if n == 0 {
            return out;
        }
        // Column-major steps: axis k moves by the product of the axes
        // before it.
        let mut steps = Vec::with_capacity(shape.len());
        let mut step = 1usize;
        for d in shape {
            steps.push(step);
            step *= d;
        }
        let inner_step = steps[shape.len() - 1];
        let mut index = vec![0usize; outer.len()];
        let mut base = 0usize;
        loop {
            out.extend((0..inner).map(|i| v[base + i * inner_step]));
            // The next row: the odometer over the outer axes.
            let mut axis = outer.len();
            loop {
                if axis == 0 {
                    return out;
                }
                axis -= 1;
                index[axis] += 1;
                base += steps[axis];
                if index[axis] < outer[axis] {
                    break;
                }
                base -= steps[axis] * outer[axis];
                index[axis] = 0;
            }
        }
    }
    match flat {
        Data::Int(v) => Data::Int(reorder(v, shape).into()),
        Data::Float(v) => Data::Float(reorder(v, shape).into()),
        Data::Bool(v) => Data::Bool(reorder(v, shape).into()),
        Data::Atoms(v) => Data::Atoms(v.clone()),
        Data::Records(r) => Data::Records(r.clone()),
    }
}

/// The array as an `.npy` file (version 1.0, C order).
pub fn write_npy<F>(a: &Array<F>) -> Result<Vec<u8>, String> {
    let descr = match &a.data {
        Data::Int(_) => "<i8",
        Data::Float(_) => "<f4",
        Data::Bool(_) => "|b1",
        Data::Atoms(_) | Data::Records(_) => {
            return Err("a box, record or function cannot be written as .npy".into());
        }
    };
    let shape = match a.shape.as_slice() {
        [d] => format!("({d},)"),
        s => format!(
            "({})",
            s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic, version, length, header and newline: a multiple of 64 bytes.
    let used = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - used % 64) % 64));
    header.push('\n');
    let len = u16::try_from(header.len()).map_err(|_| "the .npy header is too long".to_string())?;
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    a.data.write_le(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print::to_string;
    use crate::read::read_value;

    fn round_trip(text: &str) -> String {
        match read_value(text)
            .and_then(|v| write_npy(&v))
            .and_then(|b| read_npy(&b))
        {
            Ok(v) => to_string(&v),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn values_round_trip() {
        for text in ["[[1 2 3] [4 5 6]]", "[1.5 -0.0]", "#t", "[[#t #f]]", "7"] {
            assert_eq!(round_trip(text), text);
        }
    }

    #[test]
    fn header_is_aligned() {
        let bytes = read_value("[1 2 3]")
            .and_then(|v| write_npy(&v))
            .unwrap_or_default();
        let len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        assert_eq!((10 + len) % 64, 0);
        assert_eq!(bytes.len(), 10 + len + 24);
    }

    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}\n",
            if fortran { "True" } else { "False" }
        );
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn shown(bytes: &[u8]) -> String {
        match read_npy(bytes) {
            Ok(v) => to_string(&v),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn other_numpy_types() {
        let f64s: Vec<u8> = [1.5f64, -2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(shown(&npy("<f8", false, "(2,)", &f64s)), "[1.5 -2.0]");
        let i32s: Vec<u8> = [-1i32, 7].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(shown(&npy("<i4", false, "(2,)", &i32s)), "[-1 7]");
        assert_eq!(shown(&npy("|u1", false, "(2,)", &[255, 1])), "[255 1]");
        // [[1 2 3] [4 5 6]] stored by columns.
        let cols: Vec<u8> = [1i64, 4, 2, 5, 3, 6]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(shown(&npy("<i8", true, "(2, 3)", &cols)), "[[1 2 3] [4 5 6]]");
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(shown(b"hello").starts_with("error: not a NumPy"));
        assert!(
            shown(&npy("<c8", false, "(1,)", &[0; 8])).starts_with("error: unsupported element type <c8")
        );
        assert!(shown(&npy("<i8", false, "(3,)", &[0; 8])).starts_with("error: the data holds fewer"));
        assert!(shown(&npy("<i8", false, "(3", &[0; 24])).starts_with("error: "));
        assert!(shown(&npy(">i8", false, "(1,)", &[0; 8])).starts_with("error: unsupported"));
    }
}
