//! Arrays of boxes: a frame whose cells are boxes of different sizes (a
//! lifted `iota`, a `filter` inside a map, a frame of `unique`s), held as
//! a ragged array. Sizes before values: a first pass computes every
//! cell's witness and payload extents, a prefix sum of the payloads' atom
//! counts gives each cell's offset, and a second pass writes each payload
//! into one flat buffer at its offset.

use super::*;

/// A frame of boxes held ragged (see the module's documentation).
#[derive(Clone, Debug)]
pub(super) struct BoxFrame {
    /// Each cell's witness sizes, then its payload's extents (Int, the
    /// frame then `rank + payload_rank`).
    shapes: View,
    /// Where each cell's payload starts in `payload` (Int, the frame).
    offsets: View,
    payload: Var,
    elem: Elem,
    /// Each witness (a box whose payload is a box has several): whether
    /// it is a shape (else one dimension), and how many sizes it has.
    witnesses: Vec<(bool, usize)>,
    payload_rank: usize,
    /// How many atoms all the payloads hold, where this is the whole
    /// frame (not a cell of it).
    total: Option<Expr>,
}

impl BoxFrame {
    /// The frame's extents.
    pub(super) fn frame(&self) -> &[Expr] {
        &self.offsets.dims
    }

    /// The cell at `idx`: a box where `idx` indexes the whole frame, else
    /// the frame of boxes below it.
    pub(super) fn cell<'m>(&self, idx: &[Expr]) -> Val<'m> {
        if idx.len() < self.offsets.dims.len() {
            return Val::Boxes(Rc::new(BoxFrame {
                shapes: self.shapes.cell(idx),
                offsets: self.offsets.cell(idx),
                total: None,
                ..self.clone()
            }));
        }
        let sizes = self.shapes.cell(idx);
        let at = |k: usize| sizes.cell(&[Expr::Int(k as i64)]).load();
        let rank = witness_rank(&self.witnesses);
        let dims = (rank..rank + self.payload_rank).map(at).collect();
        let mut payload = View::contiguous(self.payload, self.elem, dims);
        payload.offset = self.offsets.cell(idx).load();
        let mut v = cell_val(payload);
        let mut end = rank;
        for (shape, n) in self.witnesses.iter().rev() {
            let start = end - n;
            let witness = if *shape {
                IndexVal::Shape((start..end).map(at).collect())
            } else {
                IndexVal::Dim(at(start))
            };
            end = start;
            v = Val::Box {
                witness,
                payload: std::boxed::Box::new(v),
            };
        }
        v
    }
}

fn witness_rank(witnesses: &[(bool, usize)]) -> usize {
    witnesses.iter().map(|w| w.1).sum()
}

/// The kinds of `witnesses` (see [`BoxFrame::witnesses`]).
fn kinds(witnesses: &[IndexVal]) -> Vec<(bool, usize)> {
    witnesses
        .iter()
        .map(|w| (matches!(w, IndexVal::Shape(_)), w.dims().len()))
        .collect()
}

/// One cell's box, its payload forced, with what its shape is.
struct Cell<'m> {
    /// Its witnesses, outermost box first.
    witness: Vec<IndexVal>,
    payload: Val<'m>,
    dims: Vec<Expr>,
}

impl<'m> Alloc<'m> {
    /// An array of boxes (a map or frame whose atoms are boxes).
    pub(super) fn box_frame(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        // The payloads' atoms (below any boxes of boxes).
        let mut atom = &e.ty.atom;
        while let TyAtom::Sigma(_, inner) = atom {
            atom = &inner.atom;
        }
        let elem = elem_of(atom)?;
        match &e.kind {
            Kind::Frame { shape, elems } => {
                let mut cells = Vec::with_capacity(elems.len());
                for x in elems {
                    if !x.ty.shape.is_scalar() {
                        return unsupported("a frame of arrays of boxes");
                    }
                    let v = self.value(x, body)?;
                    cells.push(self.box_cell(v, body)?);
                }
                self.boxes_of_cells(shape, cells, elem, body)
            }
            Kind::Array { shape, atoms } => {
                let mut cells = Vec::with_capacity(atoms.len());
                for a in atoms {
                    let Atom::Box {
                        witness,
                        body: payload,
                    } = a
                    else {
                        return unsupported("boxes");
                    };
                    let witness = self.index(witness)?;
                    let payload = self.value(payload, body)?;
                    let v = Val::Box {
                        witness,
                        payload: std::boxed::Box::new(payload),
                    };
                    cells.push(self.box_cell(v, body)?);
                }
                self.boxes_of_cells(shape, cells, elem, body)
            }
            Kind::Map {
                frame,
                binds,
                body: cell,
            } if cell.ty.shape.is_scalar() => {
                let frame = self.dims(frame)?;
                let mut arrays = Vec::with_capacity(binds.len());
                for b in binds {
                    let v = match self.value(&b.value, body)? {
                        Val::Delayed(d) => self.force(Val::Delayed(d), body)?,
                        v => v,
                    };
                    match v {
                        v @ (Val::Array(_) | Val::Rotated(_) | Val::Record(_) | Val::Boxes(_)) => {
                            arrays.push((b.var, v))
                        }
                        _ => return unsupported("a map of boxes over an array of functions"),
                    }
                }
                self.map_of_boxes(frame, &arrays, cell, elem, body)
            }
            _ => unsupported("boxes"),
        }
    }

    /// `v` (a box) with its payload forced and its payload's extents.
    fn box_cell(&mut self, v: Val<'m>, body: &mut Vec<Stmt>) -> Res<Cell<'m>> {
        let Val::Box { witness, payload } = v else {
            return unsupported("boxes");
        };
        let mut witness = vec![witness];
        let mut payload = self.force(*payload, body)?;
        while let Val::Box {
            witness: w,
            payload: p,
        } = payload
        {
            witness.push(w);
            payload = self.force(*p, body)?;
        }
        let dims = match &payload {
            Val::Scalar(..) => Vec::new(),
            Val::Array(view) => view.dims.clone(),
            _ => return unsupported("a box of boxes, records or functions in an array"),
        };
        Ok(Cell {
            witness,
            payload,
            dims,
        })
    }

    /// A frame of `shape` of boxes computed one by one, as one ragged
    /// array.
    fn boxes_of_cells(
        &mut self,
        shape: &[u64],
        cells: Vec<Cell<'m>>,
        elem: Elem,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(first) = cells.first() else {
            return unsupported("an empty frame of boxes");
        };
        let witnesses = kinds(&first.witness);
        let rank = witness_rank(&witnesses);
        let payload_rank = first.dims.len();
        for c in &cells {
            if kinds(&c.witness) != witnesses || c.dims.len() != payload_rank {
                return unsupported("a frame of boxes whose witnesses have several ranks");
            }
        }
        let width = rank + payload_rank;
        let count = cells.len() as i64;
        let shapes = self.alloc(
            "shapes",
            Elem::Int,
            vec![Expr::Int(count), Expr::Int(width as i64)],
            body,
        );
        let offsets = self.alloc("offsets", Elem::Int, vec![Expr::Int(count + 1)], body);
        let mut at = Expr::Int(0);
        for (k, c) in cells.iter().enumerate() {
            let sizes = c.witness.iter().flat_map(|w| w.dims()).chain(&c.dims);
            for (j, size) in sizes.enumerate() {
                body.push(Stmt::Store {
                    buf: shapes.buf,
                    index: Expr::Int((k * width + j) as i64),
                    value: size.clone(),
                });
            }
            body.push(Stmt::Store {
                buf: offsets.buf,
                index: Expr::Int(k as i64),
                value: at.clone(),
            });
            at = Expr::add(at, product(&c.dims));
        }
        let total = self.fresh("total");
        body.push(Stmt::Let {
            var: total,
            elem: Elem::Int,
            value: at,
        });
        body.push(Stmt::Store {
            buf: offsets.buf,
            index: Expr::Int(count),
            value: Expr::Var(total),
        });
        let payload = self.alloc("payloads", elem, vec![Expr::Var(total)], body);
        for (k, c) in cells.into_iter().enumerate() {
            let mut dest = View::contiguous(payload.buf, elem, c.dims);
            dest.offset = offsets.cell(&[Expr::Int(k as i64)]).load();
            self.copy(c.payload, &dest, body)?;
        }
        let frame: Vec<Expr> = shape.iter().map(|n| Expr::Int(*n as i64)).collect();
        let mut dims = frame.clone();
        dims.push(Expr::Int(width as i64));
        Ok(Val::Boxes(Rc::new(BoxFrame {
            shapes: View::contiguous(shapes.buf, Elem::Int, dims),
            offsets: View::contiguous(offsets.buf, Elem::Int, frame),
            payload: payload.buf,
            elem,
            witnesses,
            payload_rank,
            total: Some(Expr::Var(total)),
        })))
    }

    /// A map over `frame` whose cells are boxes: the cells computed twice,
    /// first for their sizes, then (the offsets known) for their payloads.
    fn map_of_boxes(
        &mut self,
        frame: Vec<Expr>,
        arrays: &[(VarId, Val<'m>)],
        cell: &'m maps::Expr,
        elem: Elem,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        // Sizes: each cell's witness and payload extents.
        let shapes_buf = self.fresh("shapes");
        let mut kind: Option<(Vec<(bool, usize)>, usize)> = None;
        let sizes_loop = self.each_box(&frame, arrays, cell, |_, c, idx, inner| {
            let k = (kinds(&c.witness), c.dims.len());
            let first = kind.get_or_insert_with(|| k.clone());
            if k != *first {
                return unsupported("a map of boxes whose witnesses have several ranks");
            }
            let rank = witness_rank(&k.0);
            let payload_rank = k.1;
            let mut dims = frame.clone();
            dims.push(Expr::Int((rank + payload_rank) as i64));
            let shapes = View::contiguous(shapes_buf, Elem::Int, dims);
            let sizes = c.witness.iter().flat_map(|w| w.dims()).chain(&c.dims);
            for (j, size) in sizes.enumerate() {
                let mut at = idx.to_vec();
                at.push(Expr::Int(j as i64));
                inner.push(Stmt::Store {
                    buf: shapes_buf,
                    index: shapes.cell(&at).offset,
                    value: size.clone(),
                });
            }
            Ok(())
        })?;
        let Some((witnesses, payload_rank)) = kind else {
            return unsupported("boxes");
        };
        let rank = witness_rank(&witnesses);
        let width = rank + payload_rank;
        let mut dims = frame.clone();
        dims.push(Expr::Int(width as i64));
        body.push(Stmt::Alloc {
            buf: shapes_buf,
            elem: Elem::Int,
            len: product(&dims),
        });
        body.extend(sizes_loop);
        let shapes = View::contiguous(shapes_buf, Elem::Int, dims);
        // Offsets: a prefix sum of the payloads' atom counts.
        let count = product(&frame);
        let offsets = self.alloc(
            "offsets",
            Elem::Int,
            vec![Expr::add(count.clone(), Expr::Int(1))],
            body,
        );
        let total = self.fresh("total");
        body.push(Stmt::Let {
            var: total,
            elem: Elem::Int,
            value: Expr::Int(0),
        });
        let i = self.fresh("i");
        let flat = View::contiguous(
            shapes_buf,
            Elem::Int,
            vec![count.clone(), Expr::Int(width as i64)],
        );
        let atoms = product(
            &(rank..width)
                .map(|j| flat.cell(&[Expr::Var(i), Expr::Int(j as i64)]).load())
                .collect::<Vec<_>>(),
        );
        body.push(Stmt::For {
            index: i,
            count: count.clone(),
            parallel: false,
            body: vec![
                Stmt::Store {
                    buf: offsets.buf,
                    index: Expr::Var(i),
                    value: Expr::Var(total),
                },
                Stmt::Set {
                    var: total,
                    value: Expr::add(Expr::Var(total), atoms),
                },
            ],
        });
        body.push(Stmt::Store {
            buf: offsets.buf,
            index: count,
            value: Expr::Var(total),
        });
        let offsets = View::contiguous(offsets.buf, Elem::Int, frame.clone());
        // Payloads, each at its offset.
        let payload = self.alloc("payloads", elem, vec![Expr::Var(total)], body);
        let values_loop = self.each_box(&frame, arrays, cell, |a, c, idx, inner| {
            if kinds(&c.witness) != witnesses || c.dims.len() != payload_rank {
                return unsupported("a map of boxes whose witnesses have several ranks");
            }
            let mut dest = View::contiguous(payload.buf, elem, c.dims);
            dest.offset = offsets.cell(idx).load();
            a.copy(c.payload, &dest, inner)
        })?;
        body.extend(values_loop);
        Ok(Val::Boxes(Rc::new(BoxFrame {
            shapes,
            offsets,
            payload: payload.buf,
            elem,
            witnesses,
            payload_rank,
            total: Some(Expr::Var(total)),
        })))
    }

    /// The loops of a map over `frame` whose cell (a box) each position
    /// gives to `each`.
    fn each_box(
        &mut self,
        frame: &[Expr],
        arrays: &[(VarId, Val<'m>)],
        cell: &'m maps::Expr,
        mut each: impl FnMut(&mut Self, Cell<'m>, &[Expr], &mut Vec<Stmt>) -> Res<()>,
    ) -> Res<Vec<Stmt>> {
        let indices: Vec<Var> = frame.iter().map(|_| self.fresh("i")).collect();
        let idx: Vec<Expr> = indices.iter().map(|v| Expr::Var(*v)).collect();
        let saved = self.scope.vars.clone();
        self.loop_depth += frame.len();
        let mut inner = Vec::new();
        let r = (|| {
            for (var, array) in arrays {
                let Some(v) = records::cell_val_of(array, &idx) else {
                    return unsupported("a map over an empty frame of a rotation");
                };
                self.scope.vars.insert(*var, v);
            }
            let v = self.value(cell, &mut inner)?;
            let c = self.box_cell(v, &mut inner)?;
            each(self, c, &idx, &mut inner)
        })();
        self.loop_depth -= frame.len();
        self.scope.vars = saved;
        r?;
        let outer = self.loop_depth;
        Ok(nest(&indices, frame.to_vec(), inner, outer))
    }

    /// An array of boxes at the top: each cell's witness and payload
    /// extents (an Int array of the frame, then the sizes), then all the
    /// payloads' atoms; the driver makes them boxes again.
    pub(super) fn output_boxes(&mut self, b: &BoxFrame, body: &mut Vec<Stmt>) -> Res<()> {
        let Some(total) = &b.total else {
            return unsupported("a cell of an array of boxes as a result");
        };
        let shapes = self.written(Val::Array(b.shapes.clone()), Elem::Int, &b.shapes.dims, body)?;
        self.out.outputs.push(loops::Output {
            value: shapes,
            elem: Elem::Int,
            dims: b.shapes.dims.clone(),
            witness: Some(loops::Witness::Frame(b.witnesses.clone())),
            record: None,
        });
        self.out.outputs.push(loops::Output {
            value: loops::Written::Buffer(b.payload),
            elem: b.elem,
            dims: vec![total.clone()],
            witness: None,
            record: None,
        });
        Ok(())
    }
}
