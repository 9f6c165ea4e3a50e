//! Source positions: every node of every tree carries a [`Span`].

use std::hash::{Hash, Hasher};

/// Index of a file in a [`crate::SourceMap`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// A byte range `start..end` in one source file.
///
/// Spans are metadata, not structure: two trees are the same tree when they
/// differ only in where they were written, so `Span`'s `PartialEq` is always
/// true and its `Hash` writes nothing (as `syn` does for its spans). Compare
/// positions explicitly with [`Span::same_place`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: clamp(start),
            end: clamp(end),
        }
    }

    /// The smallest span covering both (they must be in the same file).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The empty span just after this one.
    pub fn end_point(self) -> Span {
        Span {
            file: self.file,
            start: self.end,
            end: self.end,
        }
    }

    /// Whether the two spans are the same range of the same file.
    pub fn same_place(&self, other: &Span) -> bool {
        self.file == other.file && self.start == other.start && self.end == other.end
    }
}

fn clamp(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}

impl Eq for Span {}

impl Hash for Span {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}
