//! The 76 intrinsics at run time (core.md §2). Each runs on one cell of
//! each argument (lifting is the application's business), with its type and
//! index arguments.

use crate::eval::{
    Fun, IndexVal, Interpreter, Prim, Run, Value, atoms_in, check_size, fail, scalar_value, stack,
};
use crate::kernel::{self, Layout};
use crate::scalar;
use remora_syntax::ast::TypeKind;
use remora_syntax::{SourceMap, Span};
use remora_types::Atom as TyAtom;
use remora_value::{Array, Atom, Boxed, Data, Witness};

/// How many type, index and value arguments an intrinsic takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    pub types: usize,
    pub indices: usize,
    pub values: usize,
}

/// The intrinsic's signature, read off its type once per process.
pub fn signature(name: &str) -> Signature {
    static TABLE: std::sync::OnceLock<std::collections::HashMap<&'static str, Signature>> =
        std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        remora_check::intrinsics::names()
            .map(|(n, _)| (n, read_signature(n)))
            .collect()
    });
    table.get(name).copied().unwrap_or(Signature {
        types: 0,
        indices: 0,
        values: 0,
    })
}

/// Read off the intrinsic's type (∀ binders, then Π binders, then arrows).
fn read_signature(name: &str) -> Signature {
    let text = remora_check::intrinsics::names()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t)
        .unwrap_or("Int");
    let mut sources = SourceMap::new();
    let parsed = remora_syntax::parse_type(&mut sources, "<intrinsic>", text);
    let mut sig = Signature {
        types: 0,
        indices: 0,
        values: 0,
    };
    let mut t = &parsed.value;
    loop {
        match &t.kind {
            TypeKind::Forall { body, .. } => {
                sig.types += 1;
                t = body;
            }
            TypeKind::Pi { body, .. } => {
                sig.indices += 1;
                t = body;
            }
            TypeKind::Arrow { result, .. } => {
                sig.values += 1;
                t = result;
            }
            _ => return sig,
        }
    }
}

/// A scalar primitive over whole operands whose shapes are prefixes of
/// `principal` (each replicated over the rest of it).
pub fn scalar_apply<'p>(
    name: &str,
    operands: &[Value<'p>],
    principal: &[usize],
) -> Result<Data<Fun<'p>>, String> {
    let layouts: Vec<Layout> = operands
        .iter()
        .map(|o| Layout::prefix(&o.shape, principal))
        .collect();
    let refs: Vec<(&Data<Fun<'p>>, &Layout)> = operands.iter().map(|o| &o.data).zip(&layouts).collect();
    scalar::apply(name, &refs, principal)
}

fn int_of(v: &Value<'_>) -> Option<i64> {
    match &v.data {
        Data::Int(x) if x.len() == 1 => Some(x[0]),
        _ => None,
    }
}

fn dim(p: &Prim<'_>, k: usize) -> usize {
    match p.indices.get(k) {
        Some(IndexVal::Dim(d)) => *d as usize,
        Some(IndexVal::Shape(s)) => s.first().copied().unwrap_or(0) as usize,
        None => 0,
    }
}

fn shape(p: &Prim<'_>, k: usize) -> Vec<usize> {
    p.indices
        .get(k)
        .map(|i| i.dims().into_iter().map(|d| d as usize).collect())
        .unwrap_or_default()
}

/// The leading-axis items of an array, each of shape `item`. Their number
/// is checked as atoms are (items of no atoms can be very many).
fn items<'p>(a: &Value<'p>, span: Span) -> Run<Vec<Value<'p>>> {
    let Some((&n, rest)) = a.shape.split_first() else {
        return Ok(Vec::new());
    };
    check_size(n, span)?;
    let size: usize = rest.iter().product();
    Ok((0..n)
        .map(|i| Array {
            shape: rest.to_vec(),
            data: a.data.slice(i * size, size),
        })
        .collect())
}

/// Items stacked back, with `n` items of shape `item` (for none).
fn from_items<'p>(its: Vec<Value<'p>>, item: &[usize], like: &Data<Fun<'p>>, span: Span) -> Run<Value<'p>> {
    if its.is_empty() {
        return Ok(Array {
            shape: std::iter::once(0).chain(item.iter().copied()).collect(),
            data: like.empty_like(),
        });
    }
    stack(its, span)
}

/// An intrinsic applied to all its arguments. The arguments are the
/// intrinsic's alone (whoever runs it drops the application after): a
/// loop (`fold`, `iterate`, `while`) takes its state out of them, so that
/// a step that updates the state (`scatter`, `append`) writes over it in
/// place from the first step on (`moves.rs`), where a shared state would
/// be copied whole once.
pub fn run<'p>(it: &mut Interpreter, p: &mut Prim<'p>, span: Span) -> Run<Value<'p>> {
    let name = p.name;
    if scalar::is_scalar_primitive(name) {
        let data = scalar_apply(name, &p.args, &[]).or_else(|m| fail(span, m))?;
        return Ok(scalar_value(data));
    }
    let arg = |k: usize| -> Run<&Value<'p>> {
        match p.args.get(k) {
            Some(v) => Ok(v),
            None => fail(span, format!("internal error: {name} without its argument")),
        }
    };
    if matches!(name, "trace" | "trace-file") && it.batching > 0 {
        // Effects happen only once per cell: a batched evaluation that
        // meets one gives up and the cells run one by one.
        return fail(span, "trace inside a batched evaluation");
    }
    if crate::vocab::is_vocab(name) {
        return crate::vocab::run(it, p, span);
    }
    match name {
        "head" => {
            let a = arg(0)?;
            let size: usize = shape(p, 1).iter().product();
            Ok(Array {
                shape: shape(p, 1),
                data: a.data.slice(0, size),
            })
        }
        "tail" => {
            let a = arg(0)?;
            let size: usize = shape(p, 1).iter().product();
            let n = dim(p, 0);
            Ok(Array {
                shape: std::iter::once(n).chain(shape(p, 1)).collect(),
                data: a.data.slice(size, n * size),
            })
        }
        "length" => Ok(scalar_value(Data::Int(
            vec![arg(0)?.shape.first().copied().unwrap_or(0) as i64].into(),
        ))),
        "append" => append_onto(arg(0)?.clone(), arg(1)?, span),
        "rotate" => {
            let (a, k) = (arg(0)?, int_of(arg(1)?).unwrap_or(0));
            let d = a.shape.first().copied().unwrap_or(0);
            let cell: usize = a.shape.iter().skip(1).product();
            Ok(Array {
                shape: a.shape.clone(),
                data: rotate(&a.data, 1, d, cell, k),
            })
        }
        "reverse" => {
            let a = arg(0)?;
            let mut its = items(a, span)?;
            its.reverse();
            let mut v = from_items(its, &shape(p, 1), &a.data, span)?;
            v.shape = a.shape.clone();
            Ok(v)
        }
        "reduce" | "reduce/zero" | "fold" => {
            let (seed, xs) = match name {
                "reduce" => (None, arg(1)?),
                _ => (Some(&arg(1)?.data), arg(2)?),
            };
            let items = xs.shape.first().copied().unwrap_or(0);
            let inner = xs.shape.iter().skip(1).product();
            if let Some(op) = scalar_operator(arg(0)?)
                && (seed.is_some() || items > 0)
                && let Some(folded) =
                    fold_primitive(op, seed, &xs.data, [1, items, inner], fold_order(name, op))
            {
                let data = folded.or_else(|m| fail(span, m))?;
                return Ok(Array {
                    shape: xs.shape.iter().skip(1).copied().collect(),
                    data,
                });
            }
            general_fold(it, p, name, span)
        }
        "fold-right" => general_fold(it, p, name, span),
        "flatten" => {
            let a = arg(0)?;
            let Some(rows) = dim(p, 0).checked_mul(dim(p, 1)) else {
                return fail(span, "flatten: the dimension overflows");
            };
            Ok(Array {
                shape: std::iter::once(rows).chain(shape(p, 2)).collect(),
                data: a.data.clone(),
            })
        }
        "reshape" => {
            let a = arg(0)?;
            let to = shape(p, 1);
            // (Counted without wrapping: [274177 67280421310721] is not 1.)
            let count = if to.contains(&0) {
                Some(0)
            } else {
                to.iter().try_fold(1usize, |n, d| n.checked_mul(*d))
            };
            if count != Some(a.data.len()) {
                return fail(span, "reshape: two shapes contain diff # of elements");
            }
            Ok(Array {
                shape: to,
                data: a.data.clone(),
            })
        }
        "transpose2d" => {
            let a = arg(0)?;
            let (m, n) = (dim(p, 0), dim(p, 1));
            let mut cells = Vec::with_capacity(m * n);
            for j in 0..n {
                for i in 0..m {
                    cells.push(Array {
                        shape: Vec::new(),
                        data: a.data.slice(i * n + j, 1),
                    });
                }
            }
            let mut v = from_items(cells, &[], &a.data, span)?;
            v.shape = vec![n, m];
            Ok(v)
        }
        "index" => {
            let (a, i) = (arg(0)?, int_of(arg(1)?).unwrap_or(-1));
            let m = dim(p, 0);
            if i < 0 || i as usize >= m {
                return fail(span, format!("index {i} out of range for a vector of length {m}"));
            }
            Ok(Array {
                shape: Vec::new(),
                data: a.data.slice(i as usize, 1),
            })
        }
        "index2d" => {
            let a = arg(0)?;
            let ij = match &arg(1)?.data {
                Data::Int(v) if v.len() == 2 => (v[0], v[1]),
                _ => return fail(span, "index2d: the index is not two Ints"),
            };
            let (m, n) = (dim(p, 0) as i64, dim(p, 1) as i64);
            if ij.0 < 0 || ij.0 >= m || ij.1 < 0 || ij.1 >= n {
                return fail(
                    span,
                    format!("index [{} {}] out of range for a {m}×{n} matrix", ij.0, ij.1),
                );
            }
            Ok(Array {
                shape: Vec::new(),
                data: a.data.slice((ij.0 * n + ij.1) as usize, 1),
            })
        }
        "iota/static" => {
            let s = shape(p, 0);
            let size = atoms_in(&s);
            check_size(size, span)?;
            Ok(Array {
                shape: s,
                data: Data::Int(counting(size, span)?.into()),
            })
        }
        "iota" => {
            let dims = match &arg(0)?.data {
                Data::Int(v) => v.clone(),
                _ => return fail(span, "iota: not an Int vector"),
            };
            if let Some(d) = dims.iter().find(|d| **d < 0) {
                return fail(span, format!("iota: negative dimension {d}"));
            }
            let size = dims
                .iter()
                .try_fold(1usize, |a, d| a.checked_mul(*d as usize))
                .unwrap_or(usize::MAX);
            check_size(size, span)?;
            let payload = Array {
                shape: dims.iter().map(|d| *d as usize).collect(),
                data: Data::Int(counting(size, span)?.into()),
            };
            Ok(scalar_value(Data::Atoms(
                vec![Atom::Box(Boxed {
                    witnesses: vec![Witness::Shape(dims.to_vec())],
                    payload,
                })]
                .into(),
            )))
        }
        "f.sum" | "f.product" | "sum" | "product" | "any" | "all" => {
            // Over the atoms, in the order `reduce` would (a tree for
            // `f.sum` of many atoms), from the operator's unit.
            let xs = arg(0)?;
            let Some((op, unit)) = whole_fold(name, &xs.data) else {
                return fail(span, format!("{name}: not an array of the right atoms"));
            };
            let order = fold_order(name, op);
            match fold_primitive(op, Some(&unit), &xs.data, [1, xs.data.len(), 1], order) {
                Some(r) => Ok(scalar_value(r.or_else(|m| fail(span, m))?)),
                None => fail(span, format!("internal error: {name} has no fold")),
            }
        }
        "count" => match &arg(0)?.data {
            Data::Bool(v) => Ok(scalar_value(Data::Int(
                vec![v.iter().filter(|b| **b).count() as i64].into(),
            ))),
            _ => fail(span, format!("{name}: not a Bool array")),
        },
        "equal" => {
            // Value equality: floats as floats (-0.0 = 0.0, NaN ≠ NaN).
            let (a, b) = (arg(0)?, arg(1)?);
            let same = a.shape == b.shape
                && match (&a.data, &b.data) {
                    (Data::Int(x), Data::Int(y)) => x == y,
                    (Data::Float(x), Data::Float(y)) => x == y,
                    (Data::Bool(x), Data::Bool(y)) => x == y,
                    (Data::Atoms(x), Data::Atoms(y)) => {
                        x.len() == y.len()
                            && x.iter().zip(y.iter()).all(|(p, q)| match (p, q) {
                                (Atom::Box(p), Atom::Box(q)) => {
                                    p.witnesses == q.witnesses
                                        && crate::to_data(&p.payload) == crate::to_data(&q.payload)
                                        && crate::to_data(&p.payload).is_some()
                                }
                                _ => false,
                            })
                    }
                    _ => false,
                };
            Ok(scalar_value(Data::Bool(vec![same].into())))
        }
        "last" | "curtail" => {
            let a = arg(0)?;
            let d = dim(p, 0);
            let item: usize = shape(p, 1).iter().product();
            let (start, n, lead) = if name == "last" {
                (d, 1, None)
            } else {
                (0, d, Some(d))
            };
            Ok(Array {
                shape: lead.into_iter().chain(shape(p, 1)).collect(),
                data: a.data.slice(start * item, n * item),
            })
        }
        "nth" => {
            let (a, i) = (arg(0)?, int_of(arg(1)?).unwrap_or(-1));
            let d = dim(p, 0);
            if i < 0 || i as usize >= d {
                return fail(span, format!("nth: index {i} out of range for {d} items"));
            }
            let item: usize = shape(p, 1).iter().product();
            Ok(Array {
                shape: shape(p, 1),
                data: a.data.slice(i as usize * item, item),
            })
        }
        "select" => {
            let c = match &arg(0)?.data {
                Data::Bool(b) if b.len() == 1 => b[0],
                _ => return fail(span, "select: the condition is not a Bool"),
            };
            Ok(if c { arg(1)? } else { arg(2)? }.clone())
        }
        "iterate" => {
            let n = int_of(arg(0)?).unwrap_or(-1);
            if n < 0 {
                return fail(span, format!("iterate: negative count {n}"));
            }
            let f = arg(1)?.clone();
            let mut x = state_of(p, 2, span)?;
            if let Some(r) = crate::masked::single_lambda(&f)
                .and_then(|f| it.loop_by_cell_program(None, Some(n as u64), &f, &one_cell(&x), &x.shape))
            {
                return Ok(Array { shape: x.shape, ..r });
            }
            for _ in 0..n {
                x = it.call_value(&f, x, span)?;
            }
            Ok(x)
        }
        "while" => {
            let (test, step) = (arg(0)?.clone(), arg(1)?.clone());
            let mut x = state_of(p, 2, span)?;
            if let (Some(t), Some(s)) = (
                crate::masked::single_lambda(&test),
                crate::masked::single_lambda(&step),
            ) && let Some(r) = it.loop_by_cell_program(Some(&t), None, &s, &one_cell(&x), &x.shape)
            {
                return Ok(Array { shape: x.shape, ..r });
            }
            loop {
                let go = it.call_value(&test, x.clone(), span)?;
                match &go.data {
                    Data::Bool(b) if b.len() == 1 && b[0] => x = it.call_value(&step, x, span)?,
                    Data::Bool(b) if b.len() == 1 => return Ok(x),
                    _ => return fail(span, "while: the test did not give a Bool"),
                }
            }
        }
        "scan" | "iscan" => {
            // Every partial fold, left to right: `scan` from the seed
            // (d + 1 results), `iscan` from the first item (d results).
            let op = arg(0)?.clone();
            let (mut acc, rest, like) = if name == "scan" {
                (Some(arg(1)?.clone()), items(arg(2)?, span)?, &arg(2)?.data)
            } else {
                (None, items(arg(1)?, span)?, &arg(1)?.data)
            };
            let mut out = Vec::with_capacity(rest.len() + 1);
            if let Some(a) = &acc {
                out.push(a.clone());
            }
            for x in rest {
                let next = match acc.take() {
                    None => x,
                    Some(a) => it.call2(&op, a, x, span)?,
                };
                out.push(next.clone());
                acc = Some(next);
            }
            from_items(out, &shape(p, 1), like, span)
        }
        "replicate" => {
            let a = arg(0)?;
            let frame = shape(p, 0);
            let copies = atoms_in(&frame);
            check_size(copies.saturating_mul(a.data.len()), span)?;
            let mut data = a.data.empty_like();
            for _ in 0..copies {
                data.append(a.data.clone()).or_else(|m| fail(span, m))?;
            }
            Ok(Array {
                shape: frame.into_iter().chain(a.shape.iter().copied()).collect(),
                data,
            })
        }
        "sort" | "grade" | "f.sort" | "f.grade" => {
            // Ascending and stable; NaN sorts last (crate::sort).
            let a = arg(0)?;
            let keys = |n: usize, key: &dyn Fn(usize) -> u64| -> Run<Vec<u64>> {
                let mut keys = crate::kernel::buffer(n).or_else(|m| fail(span, m))?;
                keys.extend((0..n).map(key));
                Ok(keys)
            };
            let data = match (name, &a.data) {
                ("sort", Data::Int(v)) => {
                    Data::Int(crate::sort::sort_ints(v).or_else(|m| fail(span, m))?.into())
                }
                ("grade", Data::Int(v)) => match crate::sort::grade_small_range(v) {
                    Some(order) => Data::Int(order.or_else(|m| fail(span, m))?.into()),
                    None => grade_data(&keys(v.len(), &|i| crate::sort::int_key(v[i]))?)
                        .or_else(|m| fail(span, m))?,
                },
                ("f.grade", Data::Float(v)) => grade_data(&keys(v.len(), &|i| crate::sort::float_key(v[i]))?)
                    .or_else(|m| fail(span, m))?,
                ("f.sort", Data::Float(v)) => {
                    let order = crate::sort::grade(&keys(v.len(), &|i| crate::sort::float_key(v[i]))?)
                        .or_else(|m| fail(span, m))?;
                    let mut sorted = crate::kernel::buffer(v.len()).or_else(|m| fail(span, m))?;
                    sorted.extend(order.into_iter().map(|i| v[i]));
                    Data::Float(sorted.into())
                }
                _ => return fail(span, format!("{name}: not a vector of numbers")),
            };
            Ok(Array {
                shape: a.shape.clone(),
                data,
            })
        }
        "filter" => {
            let (flags, a) = (arg(0)?, arg(1)?);
            let Data::Bool(keep) = &flags.data else {
                return fail(span, "filter: the flags are not Bools");
            };
            let item: usize = shape(p, 1).iter().product();
            let starts: Vec<usize> = keep
                .iter()
                .enumerate()
                .filter(|(_, f)| **f)
                .map(|(i, _)| i * item)
                .collect();
            let Some(data) = crate::batch::pick_data(&a.data, &starts, item) else {
                return fail(span, "internal error: filter's items do not fit");
            };
            Ok(boxed_items(starts.len(), &shape(p, 1), data))
        }
        "unique" | "unique-counts" => {
            let xs = arg(0)?;
            let d = dim(p, 0);
            let boxes = crate::search::unique_boxes(&xs.data, 1, d, name == "unique-counts")
                .or_else(|m| fail(span, format!("{name}: {m}")))?;
            Ok(scalar_value(Data::Atoms(boxes.into())))
        }
        "searchsorted" | "searchsorted/right" => {
            let (row, v) = (arg(0)?, arg(1)?);
            let d = dim(p, 0);
            let at = crate::search::search(
                &row.data,
                &v.data,
                std::iter::once(0),
                d,
                name == "searchsorted/right",
            )
            .or_else(|m| fail(span, format!("{name}: {m}")))?;
            Ok(scalar_value(Data::Int(at.into())))
        }
        "take-right" | "drop-right" => {
            let a = arg(0)?;
            let (k, d) = (dim(p, 0), dim(p, 1));
            let item: usize = shape(p, 2).iter().product();
            let (start, n) = if name == "take-right" { (d, k) } else { (0, d) };
            Ok(Array {
                shape: std::iter::once(n).chain(shape(p, 2)).collect(),
                data: a.data.slice(start * item, n * item),
            })
        }
        "take" | "drop" => {
            // The ispace arguments give the split: $k items, then $d.
            let a = arg(0)?;
            let (k, d) = (dim(p, 0), dim(p, 1));
            let item: usize = shape(p, 2).iter().product();
            let (start, n) = if name == "take" { (0, k) } else { (k, d) };
            Ok(Array {
                shape: std::iter::once(n).chain(shape(p, 2)).collect(),
                data: a.data.slice(start * item, n * item),
            })
        }
        "take*" | "drop*" => {
            // The count is a value: 0 ≤ n ≤ $d, else an error.
            let (n, a) = (int_of(arg(0)?).unwrap_or(-1), arg(1)?);
            let d = dim(p, 0);
            if n < 0 || n as usize > d {
                return fail(span, format!("{name}: count {n} out of range for {d} items"));
            }
            let n = n as usize;
            let item: usize = shape(p, 1).iter().product();
            let (start, k) = if name == "take*" { (0, n) } else { (n, d - n) };
            Ok(boxed_items(k, &shape(p, 1), a.data.slice(start * item, k * item)))
        }
        "windows" => {
            // Every run of $w consecutive items: $k + 1 of them.
            let a = arg(0)?;
            let (w, k) = (dim(p, 0), dim(p, 1));
            let cell = shape(p, 2);
            let item: usize = cell.iter().product();
            check_size((k + 1).saturating_mul(w).saturating_mul(item), span)?;
            check_size(k.saturating_add(1), span)?;
            let mut data = a.data.empty_like();
            for i in 0..=k {
                data.append(a.data.slice(i * item, w * item))
                    .or_else(|m| fail(span, m))?;
            }
            Ok(Array {
                shape: [k + 1, w].into_iter().chain(cell).collect(),
                data,
            })
        }
        "sort-by" | "grade-by" => {
            // Stable merge sort by the less-than: an item moves before an
            // earlier one only when it is strictly less.
            let (less, a) = (arg(0)?.clone(), arg(1)?);
            let its = items(a, span)?;
            let order = merge_sort(its.len(), |i, j| {
                let lt = it.call2(&less, its[i].clone(), its[j].clone(), span)?;
                match &lt.data {
                    Data::Bool(b) if b.len() == 1 => Ok(b[0]),
                    _ => fail(span, format!("{name}: the less-than did not give a Bool")),
                }
            })?;
            if name == "grade-by" {
                return Ok(Array {
                    shape: vec![order.len()],
                    data: Data::Int(order.iter().map(|&i| i as i64).collect()),
                });
            }
            let mut v = from_items(
                order.iter().map(|&i| its[i].clone()).collect(),
                &shape(p, 1),
                &a.data,
                span,
            )?;
            v.shape = a.shape.clone();
            Ok(v)
        }
        // (The destination shared: its buffer copied at the first write.)
        "scatter" => scatter_onto(arg(0)?.clone(), arg(1)?, arg(2)?, span),
        "hist" => {
            // $m bins, each starting from the neutral element; item i is
            // combined into bin idx[i], in order; other indices are skipped.
            let (op, neutral, idx, xs) = (arg(0)?, arg(1)?, arg(2)?, arg(3)?);
            let m = dim(p, 0);
            let cell = shape(p, 2);
            let inner: usize = cell.iter().product();
            let Data::Int(idx) = &idx.data else {
                return fail(span, "hist: the indices are not Ints");
            };
            check_size(m.saturating_mul(inner), span)?;
            let shape_out: Vec<usize> = std::iter::once(m).chain(cell.iter().copied()).collect();
            if let Some(op) = scalar_operator(op)
                && let Some(data) = hist_primitive(op, &neutral.data, idx, &xs.data, m, inner)
            {
                return Ok(Array {
                    shape: shape_out,
                    data,
                });
            }
            let op = op.clone();
            check_size(m, span)?;
            let mut bins = vec![neutral.clone(); m];
            for (x, &j) in items(xs, span)?.into_iter().zip(idx.iter()) {
                if j >= 0 && (j as usize) < m {
                    let acc = std::mem::replace(&mut bins[j as usize], neutral.clone());
                    bins[j as usize] = it.call2(&op, acc, x, span)?;
                }
            }
            let mut v = from_items(bins, &cell, &neutral.data, span)?;
            v.shape = shape_out;
            Ok(v)
        }
        "range" => {
            let n = int_of(arg(0)?).unwrap_or(-1);
            if n < 0 {
                return fail(span, format!("range: negative length {n}"));
            }
            check_size(n as usize, span)?;
            Ok(boxed_items(n as usize, &[], Data::Int((0..n).collect())))
        }
        "reify-dim" => Ok(scalar_value(Data::Int(vec![dim(p, 0) as i64].into()))),
        "reify-shape" => {
            let s: Vec<i64> = shape(p, 0).into_iter().map(|d| d as i64).collect();
            Ok(scalar_value(Data::Atoms(
                vec![Atom::Box(Boxed {
                    witnesses: vec![Witness::Dim(s.len() as i64)],
                    payload: Array {
                        shape: vec![s.len()],
                        data: Data::Int(s.into()),
                    },
                })]
                .into(),
            )))
        }
        "undefined" => fail(span, "Prelude.undefined"),
        "trace" => {
            // A string literal as the label is printed as its text.
            let label = arg(0)?;
            let text = it
                .text_labels
                .contains(&crate::eval::position(span))
                .then(|| string_of(label).ok())
                .flatten();
            let shown = match text {
                Some(text) => text,
                None => remora_value::print::to_string_checked(label).or_else(|m| fail(span, m))?,
            };
            match &mut it.trace {
                Some(log) => log.push(shown),
                None => eprintln!("{shown}"),
            }
            Ok(arg(1)?.clone())
        }
        "trace-file" | "read-file-f32bin" | "read-file" if it.sandbox => fail(
            span,
            format!(
                "`{name}` is not allowed in a sandbox (remora run --sandbox): a program there touches no file"
            ),
        ),
        "trace-file" => {
            let path = string_of(arg(0)?).or_else(|m| fail(span, m))?;
            let shown = remora_value::print::to_string_checked(arg(1)?).or_else(|m| fail(span, m))?;
            use std::io::Write;
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| writeln!(f, "{shown}"));
            if let Err(e) = written {
                return fail(span, format!("trace-file: cannot write {path}: {e}"));
            }
            Ok(arg(2)?.clone())
        }
        "read-file-f32bin" => {
            let path = string_of(arg(0)?).or_else(|m| fail(span, m))?;
            let s = shape(p, 1);
            let n = atoms_in(&s);
            check_size(n, span)?;
            // Only the floats asked for are read.
            let bytes =
                remora_syntax::files::read_prefix(std::path::Path::new(&path), (n as u64).saturating_mul(4))
                    .or_else(|e| fail(span, format!("read-file-f32bin: {path}: {e}")))?;
            if bytes.len() < n * 4 {
                return fail(
                    span,
                    format!("read-file-f32bin: {path} has fewer than {n} floats"),
                );
            }
            let data = bytes[..n * 4]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok(Array {
                shape: s,
                data: Data::Float(data),
            })
        }
        "read-file" => read_file(p, span),
        _ => fail(span, format!("internal error: unknown intrinsic {name}")),
    }
}

/// Each of `outer` blocks of `d` items of `cell` atoms rotated left by `k`
/// items (modulo `d`; a negative `k` rotates right), as J's and APL's
/// rotate and NumPy's `roll(-k)`.
pub(crate) fn rotate<'p>(data: &Data<Fun<'p>>, outer: usize, d: usize, cell: usize, k: i64) -> Data<Fun<'p>> {
    fn go<T: Clone>(v: &[T], outer: usize, d: usize, cell: usize, k: i64) -> Vec<T> {
        let block = d * cell;
        let split = usize::try_from(k.rem_euclid(d.max(1) as i64)).unwrap_or(0) * cell;
        let mut out = Vec::with_capacity(v.len());
        for b in v.chunks_exact(block.max(1)).take(outer) {
            out.extend_from_slice(&b[split..]);
            out.extend_from_slice(&b[..split]);
        }
        out
    }
    match data {
        Data::Int(v) => Data::Int(go(v, outer, d, cell, k).into()),
        Data::Float(v) => Data::Float(go(v, outer, d, cell, k).into()),
        Data::Bool(v) => Data::Bool(go(v, outer, d, cell, k).into()),
        Data::Atoms(v) => Data::Atoms(go(v, outer, d, cell, k).into()),
        Data::Records(r) => r
            .map_fields(r.count, |f, size| Some(rotate(f, outer, d, cell * size, k)))
            .map_or_else(|| data.clone(), Data::records),
    }
}

/// `rotate` applied to both its arguments at once over their principal
/// frame (an array of cells and a frame of shift counts, either replicated
/// over the other's frame): each result cell written once into one buffer.
pub(crate) fn rotate_framed<'p>(args: &[(Value<'p>, Vec<usize>)], span: Span) -> Run<Value<'p>> {
    let [(a, acell), (k, _)] = args else {
        return fail(span, "internal error: rotate without its arguments");
    };
    let Data::Int(shifts) = &k.data else {
        return fail(span, "internal error: rotate by a non-Int");
    };
    let aframe = a
        .shape
        .get(..a.rank().saturating_sub(acell.len()))
        .unwrap_or_default();
    let principal = if k.shape.starts_with(aframe) {
        k.shape.clone()
    } else if aframe.starts_with(&k.shape) {
        aframe.to_vec()
    } else {
        return fail(span, "frames are not prefix-related at run time");
    };
    let n = atoms_in(&principal);
    let d = acell.first().copied().unwrap_or(0);
    let cell: usize = acell.iter().skip(1).product();
    check_size(n.saturating_mul(d).saturating_mul(cell), span)?;
    let na: usize = aframe.iter().product::<usize>().max(1);
    let nk = shifts.len().max(1);
    if a.data.len() < na * d * cell {
        return fail(
            span,
            "internal error: rotate's argument is smaller than its shape",
        );
    }
    let go = |out: &mut dyn FnMut(usize, usize, usize)| {
        for pos in 0..n {
            let ai = pos / (n / na).max(1);
            let ki = pos / (n / nk).max(1);
            let k = shifts.get(ki).copied().unwrap_or(0);
            let split = usize::try_from(k.rem_euclid(d.max(1) as i64)).unwrap_or(0) * cell;
            out(ai * d * cell, split, d * cell);
        }
    };
    fn rotated<T: Clone>(
        v: &[T],
        n: usize,
        block: usize,
        go: impl Fn(&mut dyn FnMut(usize, usize, usize)),
    ) -> Vec<T> {
        let mut out = Vec::with_capacity(n * block);
        go(&mut |start, split, len| {
            let b = &v[start..start + len];
            out.extend_from_slice(&b[split..]);
            out.extend_from_slice(&b[..split]);
        });
        out
    }
    let block = d * cell;
    // One shift for every cell of a few atoms, each cell its own (a
    // 3-vector rotated by a constant in a lifted lambda, the constant
    // replicated over the frame): the same permutation of each cell's
    // atoms, a loop over cells of a constant size.
    let d_i = d.max(1) as i64;
    let alike = match shifts.first() {
        Some(k) if na == n && shifts.iter().all(|j| j.rem_euclid(d_i) == k.rem_euclid(d_i)) => {
            Some(usize::try_from(k.rem_euclid(d_i)).unwrap_or(0) * cell)
        }
        _ => None,
    };
    // Records are rotated as one atom each.
    let data = match (a.data.record_atoms(), alike) {
        (Data::Int(v), Some(split)) if let Some(r) = rotated_alike(&v, n, block, split) => {
            Data::Int(r.into())
        }
        (Data::Float(v), Some(split)) if let Some(r) = rotated_alike(&v, n, block, split) => {
            Data::Float(r.into())
        }
        (Data::Bool(v), Some(split)) if let Some(r) = rotated_alike(&v, n, block, split) => {
            Data::Bool(r.into())
        }
        (Data::Int(v), _) => Data::Int(rotated(&v, n, block, go).into()),
        (Data::Float(v), _) => Data::Float(rotated(&v, n, block, go).into()),
        (Data::Bool(v), _) => Data::Bool(rotated(&v, n, block, go).into()),
        (Data::Atoms(v), _) => Data::Atoms(rotated(&v, n, block, go).into()),
        (Data::Records(_), _) => return fail(span, "internal error: records not made atoms"),
    };
    Ok(Array {
        shape: principal.into_iter().chain(acell.iter().copied()).collect(),
        data,
    })
}

/// The first `n` cells of `block` atoms of `v`, each rotated left by
/// `split` atoms, for a block of at most 8 atoms (`None`: a longer one,
/// whose two pieces a cell copy as they lie).
fn rotated_alike<T: Copy>(v: &[T], n: usize, block: usize, split: usize) -> Option<Vec<T>> {
    fn cells<T: Copy, const B: usize>(v: &[T], split: usize) -> Vec<T> {
        let at: [usize; B] = std::array::from_fn(|j| (j + split) % B);
        let (cells, _) = v.as_chunks::<B>();
        let out: Vec<[T; B]> = cells.iter().map(|c| std::array::from_fn(|j| c[at[j]])).collect();
        out.into_flattened()
    }
    let v = v.get(..n.checked_mul(block)?)?;
    Some(match block {
        2 => cells::<T, 2>(v, split),
        3 => cells::<T, 3>(v, split),
        4 => cells::<T, 4>(v, split),
        5 => cells::<T, 5>(v, split),
        6 => cells::<T, 6>(v, split),
        7 => cells::<T, 7>(v, split),
        8 => cells::<T, 8>(v, split),
        _ => return None,
    })
}

/// A box of `k` items of shape `cell` (the result of `filter`, `range`,
/// `take*`, `drop*`): its witness is the count.
pub(crate) fn boxed_items<'p>(k: usize, cell: &[usize], data: Data<Fun<'p>>) -> Value<'p> {
    let payload = Array {
        shape: std::iter::once(k).chain(cell.iter().copied()).collect(),
        data,
    };
    scalar_value(Data::Atoms(
        vec![Atom::Box(Boxed {
            witnesses: vec![Witness::Dim(k as i64)],
            payload,
        })]
        .into(),
    ))
}

/// `(append a b)` written onto `a`'s buffer: in place when no other value
/// holds it (grown as a vector grows: `moves.rs`), onto a copy otherwise.
pub(crate) fn append_onto<'p>(a: Value<'p>, b: &Value<'p>, span: Span) -> Run<Value<'p>> {
    check_size(a.data.len().saturating_add(b.data.len()), span)?;
    let rows = a.shape.first().copied().unwrap_or(0) + b.shape.first().copied().unwrap_or(0);
    let Array { mut shape, mut data } = a;
    data.append(b.data.clone()).or_else(|m| fail(span, m))?;
    match shape.first_mut() {
        Some(d) => *d = rows,
        None => shape.push(rows),
    }
    Ok(Array { shape, data })
}

/// `(scatter dest idx src)` written onto `dest`'s buffer: in place when no
/// other value holds it (`moves.rs`), onto a copy made at the first write
/// otherwise. The items of the source are written at their indices, in
/// order (the last write wins); indices outside [0, m) are skipped.
pub(crate) fn scatter_onto<'p>(
    dest: Value<'p>,
    idx: &Value<'p>,
    src: &Value<'p>,
    span: Span,
) -> Run<Value<'p>> {
    let m = dest.shape.first().copied().unwrap_or(0);
    let item: usize = dest.shape.iter().skip(1).product();
    let Data::Int(idx) = &idx.data else {
        return fail(span, "scatter: the indices are not Ints");
    };
    let rows = idx
        .iter()
        .enumerate()
        .filter_map(|(i, &j)| usize::try_from(j).ok().filter(|j| *j < m).map(|j| (i, j)));
    let Array { shape, mut data } = dest;
    if crate::masked::put_rows(&mut data, &src.data, rows, item).is_none() {
        return fail(span, "internal error: scatter's items do not fit");
    }
    Ok(Array { shape, data })
}

/// `take*` or `drop*` of an array no other value holds: its own buffer
/// cut to the items kept (no copy, and no fresh memory), where `run`
/// would copy them out. `None` when the buffer is shared, or the count out
/// of range (`run` then reports it).
pub(crate) fn take_in_place<'p>(p: &mut Prim<'p>) -> Option<Value<'p>> {
    if !matches!(p.name, "take*" | "drop*") {
        return None;
    }
    let n = usize::try_from(int_of(p.args.first()?)?).ok()?;
    let d = dim(p, 0);
    let cell = shape(p, 1);
    let item: usize = cell.iter().product();
    let a = p.args.get_mut(1)?;
    if n > d || a.data.len() != d.checked_mul(item)? {
        return None;
    }
    let (cut, k) = if p.name == "take*" {
        (n * item..d * item, n)
    } else {
        (0..n * item, d - n)
    };
    fn cut_out<T>(v: &mut remora_value::Buf<T>, cut: std::ops::Range<usize>) -> Option<()> {
        v.unique_mut()?.drain(cut);
        Some(())
    }
    match &mut a.data {
        Data::Int(v) => cut_out(v, cut)?,
        Data::Float(v) => cut_out(v, cut)?,
        Data::Bool(v) => cut_out(v, cut)?,
        _ => return None,
    }
    let data = std::mem::replace(&mut a.data, Data::Int(Vec::new().into()));
    Some(boxed_items(k, &cell, data))
}

/// A grade as Int data.
fn grade_data<'p>(keys: &[u64]) -> Result<Data<Fun<'p>>, &'static str> {
    let order = crate::sort::grade(keys)?;
    let mut out = crate::kernel::buffer(order.len())?;
    out.extend(order.into_iter().map(|i| i as i64));
    Ok(Data::Int(out.into()))
}

/// A stable merge sort of `0..n` by a fallible less-than (a user's
/// function: it need not be a total order, and an error stops the sort).
/// `sort_by.rs` runs it on keys, comparing them natively.
pub(crate) fn merge_sort<E>(
    n: usize,
    mut less: impl FnMut(usize, usize) -> Result<bool, E>,
) -> Result<Vec<usize>, E> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut buf = order.clone();
    let mut width = 1;
    while width < n {
        for lo in (0..n).step_by(2 * width) {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut i, mut j, mut k) = (lo, mid, lo);
            while i < mid && j < hi {
                // Take from the right run only when strictly less.
                if less(order[j], order[i])? {
                    buf[k] = order[j];
                    j += 1;
                } else {
                    buf[k] = order[i];
                    i += 1;
                }
                k += 1;
            }
            buf[k..k + (mid - i)].copy_from_slice(&order[i..mid]);
            k += mid - i;
            buf[k..k + (hi - j)].copy_from_slice(&order[j..hi]);
        }
        std::mem::swap(&mut order, &mut buf);
        width *= 2;
    }
    Ok(order)
}

/// `hist` by a scalar primitive: one pass over the items, each combined
/// atom by atom into its bin; `None` when the types do not suit it.
fn hist_primitive<'p>(
    op: &str,
    neutral: &Data<Fun<'p>>,
    idx: &[i64],
    xs: &Data<Fun<'p>>,
    m: usize,
    inner: usize,
) -> Option<Data<Fun<'p>>> {
    macro_rules! hist {
        ($variant:ident, $x:expr, $f:expr) => {{
            let Data::$variant(seed) = neutral else {
                return None;
            };
            let mut bins = Vec::with_capacity(m * inner);
            for _ in 0..m {
                bins.extend_from_slice(seed.get(..inner)?);
            }
            for (x, &j) in $x.chunks_exact(inner.max(1)).zip(idx) {
                if j >= 0 && (j as usize) < m {
                    let bin = &mut bins[j as usize * inner..(j as usize + 1) * inner];
                    for (b, v) in bin.iter_mut().zip(x) {
                        *b = $f(*b, *v);
                    }
                }
            }
            Some(Data::$variant(bins.into()))
        }};
    }
    if inner == 0 {
        return None;
    }
    match (op, xs) {
        ("+", Data::Int(x)) => hist!(Int, x, i64::wrapping_add),
        ("*", Data::Int(x)) => hist!(Int, x, i64::wrapping_mul),
        ("max", Data::Int(x)) => hist!(Int, x, i64::max),
        ("min", Data::Int(x)) => hist!(Int, x, i64::min),
        ("f.+", Data::Float(x)) => hist!(Float, x, |a: f32, b: f32| a + b),
        ("f.*", Data::Float(x)) => hist!(Float, x, |a: f32, b: f32| a * b),
        ("f.max", Data::Float(x)) => hist!(Float, x, scalar::fmax),
        ("f.min", Data::Float(x)) => hist!(Float, x, scalar::fmin),
        ("and", Data::Bool(x)) => hist!(Bool, x, |a: bool, b: bool| a && b),
        ("or", Data::Bool(x)) => hist!(Bool, x, |a: bool, b: bool| a || b),
        _ => None,
    }
}

/// Argument `k` of `p`, the state of a loop, taken out of the
/// application (an empty array left in its place).
fn state_of<'p>(p: &mut Prim<'p>, k: usize, span: Span) -> Run<Value<'p>> {
    match p.args.get_mut(k) {
        Some(v) => Ok(std::mem::replace(
            v,
            Array {
                shape: Vec::new(),
                data: Data::Int(Vec::new().into()),
            },
        )),
        None => fail(span, format!("internal error: {} without its state", p.name)),
    }
}

/// The folds with any operator: one call of it per item.
fn general_fold<'p>(it: &mut Interpreter, p: &mut Prim<'p>, name: &str, span: Span) -> Run<Value<'p>> {
    let arg = |k: usize| -> Run<&Value<'p>> {
        match p.args.get(k) {
            Some(v) => Ok(v),
            None => fail(span, format!("internal error: {name} without its argument")),
        }
    };
    let op = arg(0)?.clone();
    if name == "reduce" {
        let mut its = items(arg(1)?, span)?.into_iter();
        let Some(mut acc) = its.next() else {
            return fail(span, "reduce: empty array");
        };
        for x in its {
            acc = it.call2(&op, acc, x, span)?;
        }
        return Ok(acc);
    }
    let mut its = items(arg(2)?, span)?;
    let mut acc = state_of(p, 1, span)?;
    if name == "fold-right" {
        its.reverse();
        for x in its {
            acc = it.call2(&op, x, acc, span)?;
        }
    } else {
        for x in its {
            acc = it.call2(&op, acc, x, span)?;
        }
    }
    Ok(acc)
}

/// A binary scalar primitive as an operator, by name: bare (`f.+`, not
/// `(f.+ 1.0)`) or η-expanded over cells (`(fn ((a [Float 3]) (b [Float
/// 3])) (f.+ a b))`, which lifts `f.+` over the cells atom by atom, so
/// folding by it is folding by `f.+` elementwise), also where what the
/// expansion applies is itself such a lambda (a lambda of scalars lifted
/// to whole items: `(fn ((a Float) (b Float)) (f.+ a b))` reducing rows).
pub(crate) fn scalar_operator(op: &Value<'_>) -> Option<&'static str> {
    let Data::Atoms(a) = &op.data else {
        return None;
    };
    if !op.shape.is_empty() {
        return None;
    }
    match a.first()? {
        Atom::Fun(Fun::Prim(p)) if p.args.is_empty() && scalar::arity(p.name) == Some(2) => Some(p.name),
        Atom::Fun(Fun::Lambda { param: x, body, .. }) => lambda_operator(*x, body, 0),
        _ => None,
    }
}

/// How deep `lambda_operator` looks through lambdas applying lambdas.
const OPERATOR_DEPTH: usize = 8;

/// The scalar primitive the curried lambda `λx. body` applies to its two
/// parameters in order, if that is all it does (see `scalar_operator`).
fn lambda_operator(
    x: remora_check::typed::VarId,
    body: &remora_check::typed::TExpr,
    depth: usize,
) -> Option<&'static str> {
    use remora_check::typed::{TAtom, TAtomKind, TExprKind};
    let TExprKind::Array { atoms, .. } = &body.kind else {
        return None;
    };
    let [inner] = atoms.as_slice() else {
        return None;
    };
    let TAtomKind::Lambda { param: y, body } = &inner.kind else {
        return None;
    };
    let TExprKind::App { func, arg, .. } = &body.kind else {
        return None;
    };
    let TExprKind::App {
        func: head,
        arg: first,
        ..
    } = &func.kind
    else {
        return None;
    };
    // Both parameters of one shape (the operator then works atom by
    // atom): `(fn ((acc 1) (x 0)) (+ acc x))` adds a number to every atom
    // of a vector, which is not that.
    match (&first.kind, &arg.kind) {
        (TExprKind::Var(a), TExprKind::Var(b)) if a == &x && b == y && first.ty.shape == arg.ty.shape => {}
        _ => return None,
    }
    match &head.kind {
        TExprKind::Intrinsic(name) if scalar::arity(name) == Some(2) => Some(name),
        TExprKind::Array { atoms, .. } if depth < OPERATOR_DEPTH => match atoms.as_slice() {
            [
                TAtom {
                    kind: TAtomKind::Lambda { param, body },
                    ..
                },
            ] => lambda_operator(*param, body, depth + 1),
            _ => None,
        },
        _ => None,
    }
}

/// The sums and products over every atom of a cell (`f.sum`, `count` …)
/// as a fold: the scalar operator and its unit (one atom).
pub(crate) fn whole_fold<'p>(name: &str, xs: &Data<Fun<'p>>) -> Option<(&'static str, Data<Fun<'p>>)> {
    Some(match (name, xs) {
        ("f.sum", Data::Float(_)) => ("f.+", Data::Float(vec![0.0].into())),
        ("f.product", Data::Float(_)) => ("f.*", Data::Float(vec![1.0].into())),
        ("sum", Data::Int(_)) => ("+", Data::Int(vec![0].into())),
        ("product", Data::Int(_)) => ("*", Data::Int(vec![1].into())),
        ("any", Data::Bool(_)) => ("or", Data::Bool(vec![false].into())),
        ("all", Data::Bool(_)) => ("and", Data::Bool(vec![true].into())),
        _ => return None,
    })
}

/// The order a fold intrinsic combines its items in: `reduce`,
/// `reduce/zero` and the sums by a tree when the operator is `f.+` (see
/// `kernel::Order::Tree`; every other operator, and `fold`, left to right).
pub(crate) fn fold_order(name: &str, op: &str) -> kernel::Order {
    match name {
        "scan" | "iscan" => kernel::Order::Scan,
        "reduce" | "reduce/zero" | "f.sum" if op == "f.+" => kernel::Order::Tree,
        _ => kernel::Order::Left,
    }
}

/// A fold by a scalar primitive along the middle axis of `[outer, items,
/// inner]`, in `order` (see `kernel::reduce_axis`); `None` when the
/// primitive can fail or the types do not suit it (the general fold then
/// runs).
pub(crate) fn fold_primitive<'p>(
    op: &str,
    seed: Option<&Data<Fun<'p>>>,
    xs: &Data<Fun<'p>>,
    dims: [usize; 3],
    order: kernel::Order,
) -> Option<Result<Data<Fun<'p>>, &'static str>> {
    macro_rules! fold {
        ($variant:ident, $x:expr, $f:expr) => {{
            let seed = match seed {
                None => None,
                Some(Data::$variant(s)) => Some(s.as_slice()),
                Some(_) => return None,
            };
            Some(kernel::reduce_axis($x, dims, seed, order, $f).map(|v| Data::$variant(v.into())))
        }};
    }
    // Each operator is its own loop (a closure the compiler inlines).
    match (op, xs) {
        // Items of one atom, left to right: two passes that vectorise.
        ("f.max" | "f.min", Data::Float(x)) if dims[2] == 1 && order == kernel::Order::Left => {
            let seed = match seed {
                None => None,
                Some(Data::Float(s)) => Some(s.as_slice()),
                Some(_) => return None,
            };
            let r = kernel::fold_float_extreme(x, [dims[0], dims[1]], seed, op == "f.max");
            Some(r.map(|v| Data::Float(v.into())))
        }
        ("+", Data::Int(x)) => fold!(Int, x, i64::wrapping_add),
        ("-", Data::Int(x)) => fold!(Int, x, i64::wrapping_sub),
        ("*", Data::Int(x)) => fold!(Int, x, i64::wrapping_mul),
        ("max", Data::Int(x)) => fold!(Int, x, i64::max),
        ("min", Data::Int(x)) => fold!(Int, x, i64::min),
        ("bit-and", Data::Int(x)) => fold!(Int, x, |a, b| a & b),
        ("bit-or", Data::Int(x)) => fold!(Int, x, |a, b| a | b),
        ("bit-xor", Data::Int(x)) => fold!(Int, x, |a, b| a ^ b),
        ("f.+", Data::Float(x)) => fold!(Float, x, |a, b| a + b),
        ("f.-", Data::Float(x)) => fold!(Float, x, |a, b| a - b),
        ("f.*", Data::Float(x)) => fold!(Float, x, |a, b| a * b),
        ("f./", Data::Float(x)) => fold!(Float, x, |a, b| a / b),
        ("f.^", Data::Float(x)) => fold!(Float, x, crate::fmath::pow),
        ("f.max", Data::Float(x)) => fold!(Float, x, scalar::fmax),
        ("f.min", Data::Float(x)) => fold!(Float, x, scalar::fmin),
        ("and", Data::Bool(x)) => fold!(Bool, x, |a, b| a && b),
        ("or", Data::Bool(x)) => fold!(Bool, x, |a, b| a || b),
        ("bool.==", Data::Bool(x)) => fold!(Bool, x, |a, b| a == b),
        ("bool.!=", Data::Bool(x)) => fold!(Bool, x, |a, b| a != b),
        _ => None,
    }
}

/// A string argument (an Int vector of code points).
fn string_of(v: &Value<'_>) -> Result<String, String> {
    match &v.data {
        Data::Int(points) => points
            .iter()
            .map(|&c| u32::try_from(c).ok().and_then(char::from_u32))
            .collect::<Option<String>>()
            .ok_or_else(|| "a file name is not valid text".to_string()),
        _ => Err("a file name must be an Int vector".into()),
    }
}

/// `read-file`: the named file parsed as an expression, checked, run, and
/// (core.md §6 (6)) its value checked against the asserted type.
fn read_file<'p>(p: &Prim<'p>, span: Span) -> Run<Value<'p>> {
    let path = match p.args.first() {
        Some(v) => string_of(v).or_else(|m| fail(span, m))?,
        None => return fail(span, "internal error: read-file without its argument"),
    };
    let text = remora_syntax::files::read_text(
        std::path::Path::new(&path),
        remora_syntax::files::MAX_SOURCE_BYTES,
    )
    .or_else(|e| fail(span, format!("read-file: {path}: {e}")))?;
    let mut sources = SourceMap::new();
    let parsed = remora_syntax::parse_expression(&mut sources, &path, &text, remora_syntax::Dialect::Source);
    if parsed.has_errors() {
        return fail(span, format!("read-file: {path} does not parse"));
    }
    let checked = remora_check::check_expression(&parsed.value);
    let Some(typed) = checked.value.as_ref().filter(|_| !checked.has_errors()) else {
        return fail(span, format!("read-file: {path} does not type-check"));
    };
    let want_shape = shape(p, 1);
    let want_atom = p.types.first().cloned();
    let mut inner = Interpreter::default();
    let value = inner
        .eval(typed, &Default::default())
        .map_err(|e| crate::eval::RunError {
            span,
            message: format!("read-file: {path}: {}", e.message),
        })?;
    let atom_ok = match (&want_atom, &value.data) {
        (Some(TyAtom::Int), Data::Int(_))
        | (Some(TyAtom::Float), Data::Float(_))
        | (Some(TyAtom::Bool), Data::Bool(_)) => true,
        (Some(TyAtom::Int | TyAtom::Float | TyAtom::Bool), _) => false,
        _ => true,
    };
    if value.shape != want_shape {
        return fail(
            span,
            format!(
                "read-file: {path} holds a value of shape {:?}, not the asserted {:?}",
                value.shape, want_shape
            ),
        );
    }
    if !atom_ok {
        let held = match &value.data {
            Data::Int(_) => "Int",
            Data::Float(_) => "Float",
            Data::Bool(_) => "Bool",
            Data::Atoms(_) | Data::Records(_) => "boxes, records or functions",
        };
        let want = want_atom.as_ref().map_or(String::new(), |a| format!("{a:?}"));
        return fail(
            span,
            format!("read-file: {path} holds {held} atoms, not the asserted {want}"),
        );
    }
    // The value was computed without functions from this program.
    Ok(Array {
        shape: value.shape,
        data: value.data.base_atoms(),
    })
}

/// `0, 1, … n-1`, or an error where the memory cannot be had.
fn counting(n: usize, span: Span) -> Run<Vec<i64>> {
    let Some(mut v) = remora_value::limits::try_vec(n) else {
        return fail(span, format!("not enough memory for an array of {n} atoms"));
    };
    v.extend(0..n as i64);
    Ok(v)
}

/// A value as a frame of one cell (for a loop over a frame of cells).
fn one_cell<'p>(x: &Value<'p>) -> Value<'p> {
    Array {
        shape: std::iter::once(1).chain(x.shape.iter().copied()).collect(),
        data: x.data.clone(),
    }
}
