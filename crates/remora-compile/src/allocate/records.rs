//! Arrays of records, as one array per field (structure of arrays): an
//! array of records of frame `F` is a [`Val::Record`] whose fields are
//! arrays with `F` in front of their own shapes; a cell of it is the
//! record of the fields' cells. A map whose cells are records writes each
//! field into its own buffer (destination passing per field).

use super::*;

/// Where an array of records is written: one view per field.
type Fields = Vec<(String, View)>;

impl<'m> Alloc<'m> {
    /// An array of records (a map or a frame whose cells are records),
    /// computed into one buffer per field.
    pub(super) fn record_array(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let dest = self.record_dest(&e.ty, body)?;
        self.write_fields(e, &dest, body)?;
        Ok(fields_val(dest))
    }

    /// The intrinsics that take arrays of records: those that only move
    /// items along the leading axes (applied to each field, whose leading
    /// axes are the records'), and `select` (each field chosen).
    pub(super) fn records(
        &mut self,
        name: &'static str,
        indices: &[Index],
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        match (name, args) {
            ("select", [c, a @ Val::Record(_), b @ Val::Record(_)]) => {
                Some(self.select_records(c, a, b, e, body))
            }
            ("fold", [op, seed, xs]) if matches!(seed, Val::Record(_)) || matches!(xs, Val::Record(_)) => {
                Some(self.fold_records(op, seed, xs, e, body))
            }
            ("reduce", [op, xs @ Val::Record(_)]) => Some(self.reduce_records(op, None, xs, e, body)),
            ("reduce/zero", [op, seed, xs])
                if matches!(seed, Val::Record(_)) || matches!(xs, Val::Record(_)) =>
            {
                Some(self.reduce_records(op, Some(seed), xs, e, body))
            }
            ("scan", [op, z, xs]) if matches!(z, Val::Record(_)) || matches!(xs, Val::Record(_)) => {
                Some(self.scan_records(op, z, xs, e, body))
            }
            ("length", [Val::Record(fields)]) => Some(match fields.first() {
                Some((_, f)) => self.intrinsic(name, &[], indices, vec![f.clone()], e, body),
                None => unsupported("length of records without fields"),
            }),
            (
                "reverse" | "head" | "last" | "tail" | "curtail" | "index" | "nth",
                [Val::Record(fields), rest @ ..],
            ) => {
                let mut out = Vec::with_capacity(fields.len());
                for (field, v) in fields {
                    if !matches!(v, Val::Array(_)) {
                        return Some(unsupported(format!("{name} of records of this layout")));
                    }
                    let mut field_args = vec![v.clone()];
                    field_args.extend(rest.iter().cloned());
                    match self.intrinsic(name, &[], indices, field_args, e, body) {
                        Ok(x) => out.push((field.clone(), x)),
                        Err(u) => return Some(Err(u)),
                    }
                }
                Some(Ok(Val::Record(out)))
            }
            _ => None,
        }
    }

    /// `reduce` (from the first item) or `reduce/zero` (from `seed`) of
    /// records: by a lambda, so strictly left to right, a fold.
    fn reduce_records(
        &mut self,
        op: &Val<'m>,
        seed: Option<&Val<'m>>,
        xs: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        if let Some(seed) = seed {
            return self.fold_records(op, seed, xs, e, body);
        }
        let (Some(n), Some(first), Some(rest)) =
            (leading_dim(xs), cell_val_of(xs, &[Expr::Int(0)]), tail_of(xs))
        else {
            return unsupported("reduce of records of this layout");
        };
        self.fail_if(Expr::op("<", vec![n, Expr::Int(1)]), "reduce: no items", body);
        self.fold_records(op, &first, &rest, e, body)
    }

    /// `scan` of records: item 0 of the result is `z`, item `k+1` the
    /// operator applied to item `k` and the `k`th of `xs`, each field in
    /// a buffer of its own.
    fn scan_records(
        &mut self,
        op: &Val<'m>,
        z: &Val<'m>,
        xs: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(n) = leading_dim(xs) else {
            return unsupported("scan of records of this layout");
        };
        let dest = self.record_dest(&e.ty, body)?;
        self.write_record(z, &cells_of(&dest, &[Expr::Int(0)]), body)?;
        let k = self.fresh("k");
        let Some(item) = cell_val_of(xs, &[Expr::Var(k)]) else {
            return unsupported("scan of records of this layout");
        };
        self.loop_depth += 1;
        let mut inner = Vec::new();
        let r = (|| {
            let acc = fields_val(cells_of(&dest, &[Expr::Var(k)]));
            let v = self.apply(op.clone(), vec![acc, item], e, &mut inner)?;
            let next = cells_of(&dest, &[Expr::add(Expr::Var(k), Expr::Int(1))]);
            self.write_record(&v, &next, &mut inner)
        })();
        self.loop_depth -= 1;
        r?;
        body.push(Stmt::For {
            index: k,
            count: n,
            parallel: false,
            body: inner,
        });
        Ok(fields_val(dest))
    }

    /// A record value written into `dest`, field by field.
    fn write_record(&mut self, v: &Val<'m>, dest: &Fields, body: &mut Vec<Stmt>) -> Res<()> {
        let Val::Record(vals) = v else {
            return unsupported("a record that is not a record");
        };
        for (name, place) in dest {
            let Some((_, x)) = vals.iter().find(|(n, _)| n == name) else {
                return unsupported(format!("a record without the field {name}"));
            };
            self.copy(x.clone(), place, body)?;
        }
        Ok(())
    }

    /// `select` of two records (or arrays of records): each field's
    /// value copied, by the condition, into a buffer of its own.
    fn select_records(
        &mut self,
        c: &Val<'m>,
        a: &Val<'m>,
        b: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let c = match c {
            Val::Scalar(_, x) => x.clone(),
            Val::Array(v) if v.dims.is_empty() => v.load(),
            _ => return unsupported("select by an array of conditions"),
        };
        let (Val::Record(xs), Val::Record(ys)) = (a, b) else {
            return unsupported("select of a record and not a record");
        };
        let dest = self.record_dest(&e.ty, body)?;
        let mut then = Vec::new();
        let mut otherwise = Vec::new();
        for (name, place) in &dest {
            let (Some((_, x)), Some((_, y))) = (
                xs.iter().find(|(n, _)| n == name),
                ys.iter().find(|(n, _)| n == name),
            ) else {
                return unsupported(format!("a record without the field {name}"));
            };
            self.copy(x.clone(), place, &mut then)?;
            self.copy(y.clone(), place, &mut otherwise)?;
        }
        body.push(Stmt::If {
            cond: c,
            then,
            otherwise,
        });
        Ok(fields_val(dest))
    }

    /// `(if c a b)` of records: each branch written field by field into
    /// the same buffers.
    pub(super) fn record_if(
        &mut self,
        e: &'m maps::Expr,
        cond: Expr,
        then: &'m maps::Expr,
        otherwise: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let dest = self.record_dest(&e.ty, body)?;
        let mut t = Vec::new();
        self.write_fields(then, &dest, &mut t)?;
        let mut o = Vec::new();
        self.write_fields(otherwise, &dest, &mut o)?;
        body.push(Stmt::If {
            cond,
            then: t,
            otherwise: o,
        });
        Ok(fields_val(dest))
    }

    /// A record (or array of records) result: one output per field, in
    /// the type's order; the driver makes them records again.
    pub(super) fn output_record(
        &mut self,
        v: Val<'m>,
        ty: &Type,
        types: &[(String, Type)],
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let Val::Record(vals) = v else {
            return unsupported("a record result that is not a record");
        };
        if types.is_empty() {
            return unsupported("a record result without fields");
        }
        let frame = self.dims(&ty.shape)?;
        for (k, (name, field_ty)) in types.iter().enumerate() {
            let elem = elem_of(&field_ty.atom)?;
            let Some((_, x)) = vals.iter().find(|(n, _)| n == name) else {
                return unsupported(format!("a record without the field {name}"));
            };
            let mut dims = frame.clone();
            dims.extend(self.dims(&field_ty.shape)?);
            let value = self.written(x.clone(), elem, &dims, body)?;
            self.out.outputs.push(loops::Output {
                value,
                elem,
                dims,
                witness: None,
                record: Some(loops::RecordField {
                    name: name.clone(),
                    frame: frame.len(),
                    last: k + 1 == types.len(),
                }),
            });
        }
        Ok(())
    }

    /// A buffer per field for an array of records of type `ty`.
    fn record_dest(&mut self, ty: &Type, body: &mut Vec<Stmt>) -> Res<Fields> {
        let TyAtom::Record(types) = &ty.atom else {
            return unsupported("a record of a type that is not a record's");
        };
        let frame = self.dims(&ty.shape)?;
        let mut fields = Vec::with_capacity(types.len());
        for (name, field_ty) in types.iter() {
            let elem = elem_of(&field_ty.atom)?;
            let mut dims = frame.clone();
            dims.extend(self.dims(&field_ty.shape)?);
            fields.push((name.clone(), self.alloc("field", elem, dims, body)));
        }
        Ok(fields)
    }

    /// `e` (an array of records) written into `dest`, field by field.
    fn write_fields(&mut self, e: &'m maps::Expr, dest: &Fields, body: &mut Vec<Stmt>) -> Res<()> {
        match &e.kind {
            Kind::Map {
                frame,
                binds,
                body: inner,
            } if frame.is_scalar() => {
                let saved = self.scope.vars.clone();
                let r = (|| {
                    for b in binds {
                        let v = self.bound(&b.value, body)?;
                        self.scope.vars.insert(b.var, v);
                    }
                    self.write_fields(inner, dest, body)
                })();
                self.scope.vars = saved;
                r
            }
            Kind::Map {
                frame,
                binds,
                body: cell,
            } => {
                let frame = self.dims(frame)?;
                let mut arrays = Vec::with_capacity(binds.len());
                for b in binds {
                    let v = match self.value(&b.value, body)? {
                        // A map left delayed (its consumer might have fused it): computed here.
                        v @ Val::Delayed(_) => self.force(v, body)?,
                        v => v,
                    };
                    match v {
                        v @ (Val::Array(_) | Val::Rotated(_) | Val::Record(_)) => arrays.push((b.var, v)),
                        _ => return unsupported("a map over an array of functions"),
                    }
                }
                let indices: Vec<Var> = frame.iter().map(|_| self.fresh("i")).collect();
                let idx: Vec<Expr> = indices.iter().map(|v| Expr::Var(*v)).collect();
                let saved = self.scope.vars.clone();
                for (var, array) in &arrays {
                    let Some(cell) = cell_val_of(array, &idx) else {
                        self.scope.vars = saved;
                        return unsupported("a map over an empty frame of a rotation");
                    };
                    self.scope.vars.insert(*var, cell);
                }
                let cells = cells_of(dest, &idx);
                self.loop_depth += frame.len();
                let mut inner = Vec::new();
                let r = self.write_fields(cell, &cells, &mut inner);
                self.loop_depth -= frame.len();
                self.scope.vars = saved;
                r?;
                let outer = self.loop_depth;
                for (k, (index, count)) in indices.iter().zip(frame).enumerate().rev() {
                    inner = vec![Stmt::For {
                        index: *index,
                        count,
                        parallel: k == 0 && outer == 0,
                        body: inner,
                    }];
                }
                body.extend(inner);
                Ok(())
            }
            Kind::Frame { elems, shape } => {
                for (k, x) in elems.iter().enumerate() {
                    let at = flat_position(k as u64, shape);
                    let cells = cells_of(dest, &at);
                    self.write_fields(x, &cells, body)?;
                }
                Ok(())
            }
            _ => {
                let v = self.value(e, body)?;
                self.write_record(&v, dest, body)
            }
        }
    }
}

/// The extent of the leading axis of an array (of records).
pub(super) fn leading_dim(v: &Val<'_>) -> Option<Expr> {
    match v {
        Val::Array(a) => a.dims.first().cloned(),
        Val::Record(fields) => leading_dim(&fields.first()?.1),
        _ => None,
    }
}

/// The cells at `idx` of every field.
fn cells_of(fields: &Fields, idx: &[Expr]) -> Fields {
    fields.iter().map(|(n, v)| (n.clone(), v.cell(idx))).collect()
}

/// An array of records without its first item (each field's view moved
/// one item on).
fn tail_of<'m>(v: &Val<'m>) -> Option<Val<'m>> {
    match v {
        Val::Array(a) if !a.dims.is_empty() => {
            let mut t = a.clone();
            t.offset = Expr::add(t.offset, t.strides[0].clone());
            t.dims[0] = Expr::op("-", vec![t.dims[0].clone(), Expr::Int(1)]);
            Some(Val::Array(t))
        }
        Val::Record(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for (name, f) in fields {
                out.push((name.clone(), tail_of(f)?));
            }
            Some(Val::Record(out))
        }
        _ => None,
    }
}

/// The records written into `fields`.
fn fields_val<'m>(fields: Fields) -> Val<'m> {
    Val::Record(fields.into_iter().map(|(name, v)| (name, cell_val(v))).collect())
}

/// The cell at `idx` of an array that can be indexed in place: a view, a
/// rotation, or an array of records (the record of its fields' cells).
pub(super) fn cell_val_of<'m>(v: &Val<'m>, idx: &[Expr]) -> Option<Val<'m>> {
    match v {
        Val::Record(fields) => {
            let mut cells = Vec::with_capacity(fields.len());
            for (name, f) in fields {
                cells.push((name.clone(), cell_val_of(f, idx)?));
            }
            Some(Val::Record(cells))
        }
        Val::Scalar(..) if idx.is_empty() => Some(v.clone()),
        Val::Boxes(b) => Some(b.cell(idx)),
        _ => cell_of(v, idx).map(cell_val),
    }
}
