//! Arrays as data, apart from how they are computed: the value model the
//! interpreter computes with (flat, row-major, typed buffers with a shape),
//! printing exactly as remora-lang prints (core.md §4.1), and reading the
//! value syntax of test blocks (core.md §5.1) and Futhark's data formats.
//!
//! Functions are atoms too, but what a function *is* belongs to the
//! interpreter: arrays are generic over it (`F`), and data read from text
//! uses [`NoFun`], which has no values.

pub mod futhark;
pub mod print;
pub mod read;

use std::fmt;

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
    Int(Vec<i64>),
    Float(Vec<f32>),
    Bool(Vec<bool>),
    Atoms(Vec<Atom<F>>),
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
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<F> Array<F> {
    pub fn scalar_int(n: i64) -> Array<F> {
        Array {
            shape: Vec::new(),
            data: Data::Int(vec![n]),
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
        let mut data = first.data.empty_like();
        for e in elems {
            data.append(e.data)?;
        }
        let mut shape = vec![n];
        shape.extend(inner);
        Ok(Array { shape, data })
    }
}

impl<F> Data<F> {
    /// An empty buffer of the same kind.
    pub fn empty_like(&self) -> Data<F> {
        match self {
            Data::Int(_) => Data::Int(Vec::new()),
            Data::Float(_) => Data::Float(Vec::new()),
            Data::Bool(_) => Data::Bool(Vec::new()),
            Data::Atoms(_) => Data::Atoms(Vec::new()),
        }
    }

    /// Appends another buffer of the same kind.
    pub fn append(&mut self, other: Data<F>) -> Result<(), String> {
        match (self, other) {
            (Data::Int(a), Data::Int(b)) => a.extend(b),
            (Data::Float(a), Data::Float(b)) => a.extend(b),
            (Data::Bool(a), Data::Bool(b)) => a.extend(b),
            (Data::Atoms(a), Data::Atoms(b)) => a.extend(b),
            _ => return Err("the cells have different types".into()),
        }
        Ok(())
    }
}

impl<F: Clone> Data<F> {
    /// Atoms `start .. start + len` as a buffer of their own.
    pub fn slice(&self, start: usize, len: usize) -> Data<F> {
        let r = start..start + len;
        match self {
            Data::Int(v) => Data::Int(v.get(r).unwrap_or_default().to_vec()),
            Data::Float(v) => Data::Float(v.get(r).unwrap_or_default().to_vec()),
            Data::Bool(v) => Data::Bool(v.get(r).unwrap_or_default().to_vec()),
            Data::Atoms(v) => Data::Atoms(v.get(r).unwrap_or_default().to_vec()),
        }
    }
}

/// Value equality (core.md §5.1): same shape, equal atoms; floats compared
/// as floats (`-0.0 == 0.0`); an empty array equals an empty array of the
/// same shape whatever its element type.
impl<F: PartialEq> PartialEq for Array<F> {
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
            _ => false,
        }
    }
}

impl<F: PartialEq> PartialEq for Atom<F> {
    fn eq(&self, other: &Atom<F>) -> bool {
        match (self, other) {
            (Atom::Fun(a), Atom::Fun(b)) => a == b,
            (Atom::Box(a), Atom::Box(b)) => a.witnesses == b.witnesses && a.payload == b.payload,
            (Atom::Record(a), Atom::Record(b)) => a == b,
            _ => false,
        }
    }
}

impl<F: Callable> fmt::Display for Array<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print::to_string(self))
    }
}
