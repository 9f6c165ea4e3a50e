//! Arrays as data, apart from how they are computed: the value model the
//! interpreter computes with (flat, row-major, typed buffers with a shape),
//! printing exactly as remora-lang prints (core.md §4.1), and reading the
//! value syntax of test blocks (core.md §5.1) and Futhark's data formats.
//!
//! Functions are atoms too, but what a function *is* belongs to the
//! interpreter: arrays are generic over it (`F`), and data read from text
//! uses [`NoFun`], which has no values.

pub mod fmath_tables;
pub mod futhark;
pub mod image;
pub mod limits;
pub mod npy;
pub mod pretty;
pub mod print;
pub mod read;

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A buffer of atoms, shared by every value that holds it (a variable
/// reference, a reshape or a broadcast costs no copy) until one of them
/// writes to it.
#[derive(Debug)]
pub struct Buf<T>(Arc<Vec<T>>);

impl<T> Clone for Buf<T> {
    fn clone(&self) -> Buf<T> {
        Buf(Arc::clone(&self.0))
    }
}

impl<T> Default for Buf<T> {
    fn default() -> Buf<T> {
        Buf(Arc::new(Vec::new()))
    }
}

impl<T> Deref for Buf<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T: Clone> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Buf<T> {
        Buf(Arc::new(v))
    }
}

impl<T> FromIterator<T> for Buf<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Buf<T> {
        Buf(Arc::new(iter.into_iter().collect()))
    }
}

impl<'a, T> IntoIterator for &'a Buf<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> std::slice::Iter<'a, T> {
        self.0.iter()
    }
}

impl<T: PartialEq> PartialEq for Buf<T> {
    fn eq(&self, other: &Buf<T>) -> bool {
        *self.0 == *other.0
    }
}

impl<T> Buf<T> {
    /// The atoms to write in place, when no other value shares them.
    pub fn unique_mut(&mut self) -> Option<&mut Vec<T>> {
        Arc::get_mut(&mut self.0)
    }
}

impl<T: Clone> Buf<T> {
    /// The atoms as a vector of their own (no copy when unshared).
    pub fn into_vec(self) -> Vec<T> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

/// What printing needs to know of a function atom.
pub trait Callable {
    /// `#<fun>`, `#<tfun>` or `#<ifun>`.
    fn printed(&self) -> &'static str;
}

/// The function type of data that holds no functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFun {}

impl Callable for NoFun {
    fn printed(&self) -> &'static str {
        match *self {}
    }
}

/// An array: a shape and its atoms in row-major order.
#[derive(Clone, Debug)]
pub struct Array<F = NoFun> {
    pub shape: Vec<usize>,
    pub data: Data<F>,
}

/// The atoms of an array, one buffer of one kind.
#[derive(Clone, Debug)]
pub enum Data<F = NoFun> {
    Int(Buf<i64>),
    Float(Buf<f32>),
    Bool(Buf<bool>),
    Atoms(Buf<Atom<F>>),
    /// Records, as one array per field (structure of arrays).
    Records(Arc<Records<F>>),
}

/// A frame of records held as one buffer per field (structure of arrays,
/// as a lifted computation wants them): field `k` holds `count` cells of
/// shape `fields[k].cell`, in the frame's row-major order. The same
/// records as [`Atom::Record`]s, one per position, mean the same value.
#[derive(Clone, Debug)]
pub struct Records<F = NoFun> {
    pub count: usize,
    pub fields: Vec<RecordField<F>>,
}

/// One field of [`Records`].
#[derive(Clone, Debug)]
pub struct RecordField<F = NoFun> {
    pub name: String,
    pub cell: Vec<usize>,
    pub data: Data<F>,
}

impl<F> Data<F> {
    /// Records as a buffer.
    pub fn records(r: Records<F>) -> Data<F> {
        Data::Records(Arc::new(r))
    }
}

impl<F> RecordField<F> {
    /// Atoms per record.
    pub fn size(&self) -> usize {
        self.cell.iter().product()
    }
}

impl<F: Clone> Records<F> {
    /// Record `i` as a list of named arrays.
    pub fn record(&self, i: usize) -> Vec<(String, Array<F>)> {
        self.fields
            .iter()
            .map(|f| {
                let size = f.size();
                (
                    f.name.clone(),
                    Array {
                        shape: f.cell.clone(),
                        data: f.data.slice(i.saturating_mul(size), size),
                    },
                )
            })
            .collect()
    }

    /// The same records, one atom each.
    pub fn atoms(&self) -> Vec<Atom<F>> {
        (0..self.count).map(|i| Atom::Record(self.record(i))).collect()
    }

    /// The same fields, each buffer made by `f` from the field's buffer
    /// and atoms per record, for `count` records.
    pub fn map_fields(
        &self,
        count: usize,
        mut f: impl FnMut(&Data<F>, usize) -> Option<Data<F>>,
    ) -> Option<Records<F>> {
        let mut fields = Vec::with_capacity(self.fields.len());
        for field in &self.fields {
            fields.push(RecordField {
                name: field.name.clone(),
                cell: field.cell.clone(),
                data: f(&field.data, field.size())?,
            });
        }
        Some(Records { count, fields })
    }
}

/// An atom that is not a number or a Boolean.
#[derive(Clone, Debug)]
pub enum Atom<F = NoFun> {
    Fun(F),
    Box(Boxed<F>),
    Record(Vec<(String, Array<F>)>),
}

/// A box: its witnesses and its payload.
#[derive(Clone, Debug)]
pub struct Boxed<F = NoFun> {
    pub witnesses: Vec<Witness>,
    pub payload: Array<F>,
}

/// A box witness: a dimension or a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Witness {
    Dim(i64),
    Shape(Vec<i64>),
}

impl<F> Data<F> {
    pub fn len(&self) -> usize {
        match self {
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
            Data::Bool(v) => v.len(),
            Data::Atoms(v) => v.len(),
            Data::Records(r) => r.count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<F: Clone> Array<F> {
    pub fn scalar_int(n: i64) -> Array<F> {
        Array {
            shape: Vec::new(),
            data: Data::Int(vec![n].into()),
        }
    }

    /// The number of atoms the shape calls for.
    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The arrays stacked along a new leading axis (at least one); they
    /// must agree in shape and element type.
    pub fn stack(elems: Vec<Array<F>>) -> Result<Array<F>, String> {
        let n = elems.len();
        let Some(first) = elems.first() else {
            return Err("nothing to stack".into());
        };
        let inner = first.shape.clone();
        if elems.iter().any(|e| e.shape != inner) {
            return Err("the cells have different shapes".into());
        }
        if n == 1 {
            // One cell: its buffer as it is, not a copy.
            let mut elems = elems;
            let only = elems.pop().ok_or("nothing to stack")?;
            let mut shape = vec![1];
            shape.extend(only.shape);
            return Ok(Array {
                shape,
                data: only.data,
            });
        }
        let mut data = first.data.with_capacity_like(n.saturating_mul(first.data.len()));
        for e in elems {
            data.append(e.data)?;
        }
        let mut shape = vec![n];
        shape.extend(inner);
        Ok(Array { shape, data })
    }
}

/// The number of atoms of an array of this shape, for data read from a
/// file: `Err` when its dimensions other than zeros multiply past
/// `2^32` (no such array is meant; an empty one would still be a frame of
/// that many empty cells).
pub fn data_atoms(shape: &[usize]) -> Result<usize, String> {
    let positions = shape
        .iter()
        .filter(|d| **d != 0)
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .filter(|n| *n <= 1 << 32)
        .ok_or_else(|| format!("an array of shape {shape:?} is too large"))?;
    Ok(if shape.contains(&0) { 0 } else { positions })
}

impl<F> Data<F> {
    /// The same numbers and truth values as data of another function type
    /// (read from a file, or computed by another evaluation, for this
    /// one); an atom buffer (functions, boxes, records) is not carried
    /// over: it comes out empty.
    pub fn base_atoms<G>(self) -> Data<G> {
        self.base_of()
    }

    /// [`Data::base_atoms`] of a borrowed buffer (sharing it).
    fn base_of<G>(&self) -> Data<G> {
        match self {
            Data::Int(x) => Data::Int(x.clone()),
            Data::Float(x) => Data::Float(x.clone()),
            Data::Bool(x) => Data::Bool(x.clone()),
            Data::Atoms(_) => Data::Atoms(Vec::new().into()),
            Data::Records(r) => Data::Records(Arc::new(Records {
                count: r.count,
                fields: r
                    .fields
                    .iter()
                    .map(|f| RecordField {
                        name: f.name.clone(),
                        cell: f.cell.clone(),
                        data: f.data.base_of(),
                    })
                    .collect(),
            })),
        }
    }

    /// The atoms in little-endian binary, as `.npy` and Futhark's binary
    /// format hold them: `i64`, `f32`, a byte per Bool (an atom buffer,
    /// which no data format holds, writes nothing).
    pub fn write_le(&self, out: &mut Vec<u8>) {
        match self {
            Data::Int(v) => v.iter().for_each(|n| out.extend_from_slice(&n.to_le_bytes())),
            Data::Float(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Data::Bool(v) => out.extend(v.iter().map(|b| u8::from(*b))),
            Data::Atoms(_) | Data::Records(_) => {}
        }
    }
}

impl<F: Clone> Data<F> {
    /// An empty buffer of the same kind.
    pub fn empty_like(&self) -> Data<F> {
        match self {
            Data::Int(_) => Data::Int(Vec::new().into()),
            Data::Float(_) => Data::Float(Vec::new().into()),
            Data::Bool(_) => Data::Bool(Vec::new().into()),
            Data::Atoms(_) => Data::Atoms(Vec::new().into()),
            Data::Records(r) => r
                .map_fields(0, |d, _| Some(d.empty_like()))
                .map_or_else(|| Data::Atoms(Vec::new().into()), |r| Data::Records(Arc::new(r))),
        }
    }

    /// An empty buffer of the same kind with room for `n` atoms (appending
    /// up to `n` then never moves it).
    pub fn with_capacity_like(&self, n: usize) -> Data<F> {
        // Room that cannot be had is not reserved: the `append`s that fill
        // the buffer then report it.
        fn room<T>(n: usize) -> Vec<T> {
            limits::try_vec(n).unwrap_or_default()
        }
        match self {
            Data::Int(_) => Data::Int(room(n).into()),
            Data::Float(_) => Data::Float(room(n).into()),
            Data::Bool(_) => Data::Bool(room(n).into()),
            Data::Atoms(_) => Data::Atoms(room(n).into()),
            Data::Records(r) => r
                .map_fields(0, |d, size| Some(d.with_capacity_like(n.saturating_mul(size))))
                .map_or_else(|| Data::Atoms(Vec::new().into()), |r| Data::Records(Arc::new(r))),
        }
    }

    /// The atoms as a buffer of atoms, records one per position (the
    /// form a rule that knows no [`Records`] works on); other buffers as
    /// they are.
    pub fn record_atoms(&self) -> Data<F> {
        match self {
            Data::Records(r) => Data::Atoms(r.atoms().into()),
            other => other.clone(),
        }
    }

    /// `part` appended to `acc`, which the first part starts, with room
    /// for `capacity` atoms (the parts of a buffer made piece by piece).
    pub fn append_to(acc: &mut Option<Data<F>>, part: Data<F>, capacity: usize) -> Result<(), String> {
        match acc {
            Some(all) => all.append(part),
            None => {
                let mut all = part.with_capacity_like(capacity);
                all.append(part)?;
                *acc = Some(all);
                Ok(())
            }
        }
    }

    /// Appends another buffer of the same kind.
    pub fn append(&mut self, other: Data<F>) -> Result<(), String> {
        fn extend<T: Clone>(a: &mut Buf<T>, b: &[T]) -> Result<(), String> {
            let a: &mut Vec<T> = a;
            a.try_reserve(b.len()).map_err(|_| {
                format!(
                    "not enough memory for an array of {} atoms",
                    a.len().saturating_add(b.len())
                )
            })?;
            a.extend_from_slice(b);
            Ok(())
        }
        // (An empty buffer of untold kind, the empty result of a function
        // of a type variable's elements, takes the other's.)
        if matches!(&other, Data::Atoms(b) if b.is_empty()) {
            return Ok(());
        }
        if matches!(self, Data::Atoms(a) if a.is_empty()) {
            *self = other;
            return Ok(());
        }
        match (self, other) {
            (Data::Int(a), Data::Int(b)) => extend(a, &b)?,
            (Data::Float(a), Data::Float(b)) => extend(a, &b)?,
            (Data::Bool(a), Data::Bool(b)) => extend(a, &b)?,
            (Data::Atoms(a), Data::Atoms(b)) => extend(a, &b)?,
            (Data::Records(a), Data::Records(b)) => {
                let a = Arc::make_mut(a);
                if a.fields.len() != b.fields.len() {
                    return Err("the records have different fields".into());
                }
                for (x, y) in a.fields.iter_mut().zip(&b.fields) {
                    if x.name != y.name || x.cell != y.cell {
                        return Err("the records have different fields".into());
                    }
                    x.data.append(y.data.clone())?;
                }
                a.count += b.count;
            }
            (Data::Atoms(a), Data::Records(b)) => a.extend(b.atoms()),
            (a @ Data::Records(_), b @ Data::Atoms(_)) => {
                let mut atoms = a.record_atoms();
                atoms.append(b)?;
                *a = atoms;
            }
            _ => return Err("the cells have different types".into()),
        }
        Ok(())
    }
}

impl<F: Clone> Data<F> {
    /// The buffer's atoms `n` times over, in a buffer of their own; `None`
    /// when the count overflows.
    pub fn repeated(&self, n: usize) -> Option<Data<F>> {
        fn rep<T: Clone>(v: &[T], n: usize) -> Option<Vec<T>> {
            let mut out = Vec::with_capacity(v.len().checked_mul(n)?);
            for _ in 0..n {
                out.extend_from_slice(v);
            }
            Some(out)
        }
        Some(match self {
            Data::Int(v) => Data::Int(rep(v, n)?.into()),
            Data::Float(v) => Data::Float(rep(v, n)?.into()),
            Data::Bool(v) => Data::Bool(rep(v, n)?.into()),
            Data::Atoms(v) => Data::Atoms(rep(v, n)?.into()),
            Data::Records(r) => Data::Records(Arc::new(
                r.map_fields(r.count.checked_mul(n)?, |d, _| d.repeated(n))?,
            )),
        })
    }

    /// Atoms `start .. start + len` as a buffer of their own.
    pub fn slice(&self, start: usize, len: usize) -> Data<F> {
        let r = start..start + len;
        match self {
            Data::Int(v) => Data::Int(v.get(r).unwrap_or_default().to_vec().into()),
            Data::Float(v) => Data::Float(v.get(r).unwrap_or_default().to_vec().into()),
            Data::Bool(v) => Data::Bool(v.get(r).unwrap_or_default().to_vec().into()),
            Data::Atoms(v) => Data::Atoms(v.get(r).unwrap_or_default().to_vec().into()),
            Data::Records(rs) => {
                let len = len.min(rs.count.saturating_sub(start));
                rs.map_fields(len, |d, size| {
                    Some(d.slice(start.saturating_mul(size), len.saturating_mul(size)))
                })
                .map_or_else(|| Data::Atoms(Vec::new().into()), |r| Data::Records(Arc::new(r)))
            }
        }
    }
}

/// Value equality (core.md §5.1): same shape, equal atoms; floats compared
/// as floats (`-0.0 == 0.0`); an empty array equals an empty array of the
/// same shape whatever its element type.
impl<F: PartialEq + Clone> PartialEq for Array<F> {
    fn eq(&self, other: &Array<F>) -> bool {
        if self.shape != other.shape {
            return false;
        }
        if self.data.is_empty() && other.data.is_empty() {
            return true;
        }
        match (&self.data, &other.data) {
            (Data::Int(a), Data::Int(b)) => a == b,
            (Data::Float(a), Data::Float(b)) => a == b,
            (Data::Bool(a), Data::Bool(b)) => a == b,
            (Data::Atoms(a), Data::Atoms(b)) => a == b,
            (Data::Records(_), _) | (_, Data::Records(_)) => {
                match (self.data.record_atoms(), other.data.record_atoms()) {
                    (Data::Atoms(a), Data::Atoms(b)) => a == b,
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

impl<F: PartialEq + Clone> PartialEq for Atom<F> {
    fn eq(&self, other: &Atom<F>) -> bool {
        match (self, other) {
            (Atom::Fun(a), Atom::Fun(b)) => a == b,
            (Atom::Box(a), Atom::Box(b)) => a.witnesses == b.witnesses && a.payload == b.payload,
            (Atom::Record(a), Atom::Record(b)) => a == b,
            _ => false,
        }
    }
}

impl<F: Callable + Clone> fmt::Display for Array<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print::to_string(self))
    }
}

#[cfg(test)]
mod tests {
    use super::Data;

    /// An empty buffer of untold kind (`Data::Atoms` with no atoms) takes
    /// the kind of what it is appended to, or of what is appended to it;
    /// buffers of two told kinds still do not mix.
    #[test]
    fn an_empty_buffer_of_untold_kind_appends_to_any() {
        let untold = || Data::<()>::Atoms(Vec::new().into());
        let mut a = Data::<()>::Int(vec![1, 2].into());
        assert!(a.append(untold()).is_ok());
        assert!(matches!(&a, Data::Int(v) if v.len() == 2));
        let mut b = untold();
        assert!(b.append(Data::Float(vec![0.5].into())).is_ok());
        assert!(matches!(&b, Data::Float(v) if v.len() == 1));
        let mut c = Data::<()>::Int(vec![1].into());
        assert!(c.append(Data::Float(vec![0.5].into())).is_err());
    }
}
