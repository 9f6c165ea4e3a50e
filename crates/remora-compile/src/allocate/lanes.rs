//! Folds lifted over a frame: the cells in lanes. A parallel loop over
//! cells whose body folds (a sequential loop carrying a state from one
//! item to the next: the online log-sum-exp of each row, Horner's rule
//! per point) runs as one long chain of dependent steps per cell, each
//! step waiting for the last. Its iterations are independent, so any
//! interleaving of them computes the same: here [`LANES`] cells at a time,
//! each statement of the body run for every cell of the block before the
//! next (`for lane < m`, a loop the C compiler vectorises), the fold's
//! loop outside the lanes. A scalar that lives from one such group of
//! statements to another is one atom per lane (`x` → `x[lane]`), a buffer
//! of the cell's own one part per lane. Each cell gets the same
//! operations in the same order: the same bits, on any number of threads.
//! An inner loop that carries nothing (a map over the row) stays inside
//! its lane, in its order through memory.

use super::*;
use std::collections::HashSet;

/// The cells of a block.
const LANES: i64 = 32;
/// The cells of a block whose cells' atoms lie a multiple of
/// [`ALIASED_STRIDE`] atoms apart (rows of 1,024 floats): their lines
/// fall in one set of the L1 cache, which holds 8 to 12 of them, so that
/// 32 lanes evict each other's lines at every step (a fold keeping the
/// best index of each row: 3× slower than 8 lanes).
const ALIASED_LANES: i64 = 8;
/// See [`ALIASED_LANES`]: 1 KiB of floats, 2 KiB of Ints.
const ALIASED_STRIDE: i64 = 256;
/// The longest buffer of a cell's own given a part per lane.
const MOST_ATOMS: i64 = 64;
/// A fold of a known count whose steps are at most this many operations
/// in all is left as it is: the C compiler unrolls it whole and
/// vectorises the loop over the cells itself (Horner per point over 9
/// coefficients: 2.4× faster so than in lanes).
const UNROLLED_OPS: u64 = 128;

/// Every parallel loop of `body` whose iterations fold, run
/// [`LANES`] iterations at a time.
pub(super) fn cells_in_lanes(body: &mut [Stmt], names: &mut Vec<String>) {
    for s in body.iter_mut() {
        match s {
            Stmt::For {
                index,
                count,
                parallel: true,
                body: inner,
            } => {
                if let Some(cell) = Cell::of(*index, inner) {
                    *s = cell.in_lanes(count, inner, names);
                }
            }
            s => {
                for inner in s.bodies_mut() {
                    cells_in_lanes(inner, names);
                }
            }
        }
    }
}

/// A parallel loop's body that qualifies: its index, the variables it
/// declares, its buffers (of a constant length), and its literal tables
/// (read only: one for all the lanes).
struct Cell {
    index: Var,
    declared: HashSet<Var>,
    buffers: HashMap<Var, i64>,
    tables: Vec<Var>,
}

impl Cell {
    /// `body` (of the loop over `index`) if it folds and every statement
    /// in it can run lane by lane: `let`s, `set`s, stores, `if`s, and
    /// loops whose counts are the same for every cell; buffers only at
    /// its top, short and of a constant length; no reduction, call, swap
    /// or `do … while` (whose statements could not be split).
    fn of(index: Var, body: &[Stmt]) -> Option<Cell> {
        let mut cell = Cell {
            index,
            declared: HashSet::new(),
            buffers: HashMap::new(),
            tables: Vec::new(),
        };
        for s in body {
            match s {
                Stmt::Alloc {
                    buf,
                    len: Expr::Int(n),
                    ..
                } if (1..=MOST_ATOMS).contains(n) => {
                    cell.buffers.insert(*buf, *n);
                    cell.declared.insert(*buf);
                }
                Stmt::Data { buf, atoms, .. } if atoms.iter().all(|a| cell.plain(a).is_some()) => {
                    cell.tables.push(*buf);
                }
                Stmt::Alloc { .. } | Stmt::Data { .. } => return None,
                s => cell.declare(s)?,
            }
        }
        let mut written = false;
        Stmt::each(body, &mut |s| {
            written |= matches!(s, Stmt::Store { buf, .. } if cell.tables.contains(buf));
        });
        if written {
            return None;
        }
        let folds = body
            .iter()
            .any(|s| matches!(s, Stmt::For { .. }) && cell.carries(s) && !unrolled(s));
        folds.then_some(cell)
    }

    /// Records what `s` declares, `None` where it cannot run lane by lane.
    fn declare(&mut self, s: &Stmt) -> Option<()> {
        match s {
            Stmt::Let { var, value, .. } => {
                self.plain(value)?;
                self.declared.insert(*var);
            }
            Stmt::Set { var, value } => {
                self.plain(value)?;
                self.declared.contains(var).then_some(())?;
            }
            Stmt::Store { index, value, .. } => {
                self.plain(index)?;
                self.plain(value)?;
            }
            Stmt::For {
                index,
                count,
                parallel: false,
                body,
            } => {
                self.plain(count)?;
                if mentions_any(count, &self.declared) || mentions_any(count, &HashSet::from([self.index])) {
                    return None;
                }
                self.declared.insert(*index);
                for s in body {
                    self.declare(s)?;
                }
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.plain(cond)?;
                for s in then.iter().chain(otherwise) {
                    self.declare(s)?;
                }
            }
            Stmt::Fail { .. } => {}
            _ => return None,
        }
        Some(())
    }

    /// `e` has no address (a buffer handed to the runtime).
    fn plain(&self, e: &Expr) -> Option<()> {
        let mut ok = true;
        each_expr(e, &mut |x| ok &= !matches!(x, Expr::Addr { .. }));
        ok.then_some(())
    }

    /// Whether the loop `s` carries a state from one item to the next: it
    /// sets a scalar declared before it, or stores into a buffer of the
    /// cell's own.
    fn carries(&self, s: &Stmt) -> bool {
        let Stmt::For { body, .. } = s else {
            return false;
        };
        let mut inside = HashSet::new();
        declared_in(body, &mut inside);
        let mut found = false;
        Stmt::each(body, &mut |s| match s {
            Stmt::Set { var, .. } => found |= !inside.contains(var),
            Stmt::Store { buf, .. } => found |= self.buffers.contains_key(buf),
            _ => {}
        });
        found
    }

    /// Whether a fold of `body` loads atoms a multiple of
    /// [`ALIASED_STRIDE`] apart from one cell to the next (see
    /// [`ALIASED_LANES`]).
    fn aliased(&self, body: &[Stmt]) -> bool {
        let mut found = false;
        for s in body
            .iter()
            .filter(|s| matches!(s, Stmt::For { .. }) && self.carries(s))
        {
            each_stmt_expr(&[s], &mut |e| {
                each_expr(e, &mut |x| {
                    let Expr::Load { index, .. } = x else {
                        return;
                    };
                    if let Some(a) = contract::affine(index, &[self.index], &[]) {
                        found |= matches!(a.coefs[..], [Expr::Int(c)] if c != 0 && c % ALIASED_STRIDE == 0);
                    }
                })
            });
        }
        found
    }

    /// The loop over the cells (`count` of them, each `body`) as a
    /// parallel loop over blocks of [`LANES`].
    fn in_lanes(&self, count: &Expr, body: &[Stmt], names: &mut Vec<String>) -> Stmt {
        let mut fresh = |name: &str| {
            names.push(name.to_string());
            Var(names.len() as u32 - 1)
        };
        let blk = fresh("blk");
        let first = fresh("lo");
        let lanes = fresh("lanes");
        let width = if self.aliased(body) { ALIASED_LANES } else { LANES };
        // The groups of statements, each run lane by lane, and which
        // group uses each scalar.
        let mut plan = Plan::default();
        plan.walk(self, body);
        let laned: HashSet<Var> = plan
            .groups_of
            .iter()
            .filter(|(v, gs)| plan.elems.contains_key(v) && gs.len() > 1)
            .map(|(v, _)| *v)
            .collect();
        let mut lane_bufs = HashMap::new();
        let mut block = vec![
            Stmt::Let {
                var: first,
                elem: Elem::Int,
                value: Expr::mul(Expr::Var(blk), Expr::Int(width)),
            },
            Stmt::Let {
                var: lanes,
                elem: Elem::Int,
                value: Expr::op(
                    "min",
                    vec![
                        Expr::Int(width),
                        Expr::op("-", vec![count.clone(), Expr::Var(first)]),
                    ],
                ),
            },
        ];
        let mut sorted: Vec<Var> = laned.iter().copied().collect();
        sorted.sort();
        for v in sorted {
            let buf = fresh("lanes_of");
            block.push(Stmt::Alloc {
                buf,
                elem: plan.elems.get(&v).copied().unwrap_or(Elem::Int),
                len: Expr::Int(LANES),
            });
            lane_bufs.insert(v, buf);
        }
        for s in body {
            match s {
                Stmt::Alloc { buf, elem, len } => block.push(Stmt::Alloc {
                    buf: *buf,
                    elem: *elem,
                    len: Expr::mul(len.clone(), Expr::Int(LANES)),
                }),
                Stmt::Data { .. } => block.push(s.clone()),
                _ => {}
            }
        }
        let mut w = Writer {
            cell: self,
            lane_bufs,
            first,
            lanes,
            fresh: &mut fresh,
        };
        let rest: Vec<Stmt> = body
            .iter()
            .filter(|s| !matches!(s, Stmt::Alloc { .. } | Stmt::Data { .. }))
            .cloned()
            .collect();
        block.extend(w.groups(&rest));
        Stmt::For {
            index: blk,
            count: Expr::op(
                "/",
                vec![Expr::add(count.clone(), Expr::Int(width - 1)), Expr::Int(width)],
            ),
            parallel: true,
            body: block,
        }
    }
}

/// Which group (a run of statements done lane by lane) uses each
/// variable, numbered as [`Writer::groups`] numbers them.
#[derive(Default)]
struct Plan {
    groups: usize,
    groups_of: HashMap<Var, HashSet<usize>>,
    elems: HashMap<Var, Elem>,
}

impl Plan {
    fn walk(&mut self, cell: &Cell, stmts: &[Stmt]) {
        let mut open = false;
        for s in stmts {
            if matches!(s, Stmt::For { .. }) && cell.carries(s) {
                if open {
                    self.groups += 1;
                    open = false;
                }
                if let Stmt::For { body, count, .. } = s {
                    self.uses_expr(count);
                    self.walk(cell, body);
                }
                continue;
            }
            open = true;
            let g = self.groups;
            Stmt::each(std::slice::from_ref(s), &mut |s| {
                let mut note = |v: Var| {
                    self.groups_of.entry(v).or_default().insert(g);
                };
                match s {
                    Stmt::Let { var, elem, .. } => {
                        self.elems.insert(*var, *elem);
                        note(*var);
                    }
                    Stmt::Set { var, .. } => note(*var),
                    _ => {}
                }
                each_expr_of(s, &mut |e| e.each_var(&mut note));
            });
        }
        if open {
            self.groups += 1;
        }
    }

    fn uses_expr(&mut self, e: &Expr) {
        let g = self.groups;
        e.each_var(&mut |v| {
            self.groups_of.entry(v).or_default().insert(g);
        });
    }
}

/// Writes the body's groups, each a loop over the lanes.
struct Writer<'a, F: FnMut(&str) -> Var> {
    cell: &'a Cell,
    /// The scalars that live from one group to another: their atoms per lane.
    lane_bufs: HashMap<Var, Var>,
    first: Var,
    lanes: Var,
    fresh: &'a mut F,
}

impl<F: FnMut(&str) -> Var> Writer<'_, F> {
    /// `stmts` as groups run lane by lane, each loop that carries a state
    /// around the groups of its body.
    fn groups(&mut self, stmts: &[Stmt]) -> Vec<Stmt> {
        let mut out = Vec::new();
        let mut group: Vec<&Stmt> = Vec::new();
        for s in stmts {
            match s {
                Stmt::For {
                    index, count, body, ..
                } if self.cell.carries(s) => {
                    if !group.is_empty() {
                        out.push(self.lane_loop(&std::mem::take(&mut group)));
                    }
                    let body = self.groups(body);
                    out.push(Stmt::For {
                        index: *index,
                        count: count.clone(),
                        parallel: false,
                        body,
                    });
                }
                s => group.push(s),
            }
        }
        if !group.is_empty() {
            out.push(self.lane_loop(&group));
        }
        out
    }

    /// `for lane < lanes: let i = first + lane; stmts` (each statement for
    /// the cell of that lane).
    fn lane_loop(&mut self, stmts: &[&Stmt]) -> Stmt {
        let lane = (self.fresh)("lane");
        let at = (self.fresh)("cell");
        let mut reads_index = false;
        each_stmt_expr(stmts, &mut |e| {
            e.each_var(&mut |v| reads_index |= v == self.cell.index)
        });
        let mut body = Vec::new();
        if reads_index {
            body.push(Stmt::Let {
                var: at,
                elem: Elem::Int,
                value: Expr::add(Expr::Var(self.first), Expr::Var(lane)),
            });
        }
        let r = Rewrite {
            cell: self.cell,
            lane_bufs: &self.lane_bufs,
            lane,
            at,
        };
        body.extend(stmts.iter().map(|s| r.stmt(s)));
        Stmt::For {
            index: lane,
            count: Expr::Var(self.lanes),
            parallel: false,
            body,
        }
    }
}

/// The statements of one lane: the loop's index its cell's, a scalar that
/// lives across groups its lane's atom, a buffer of the cell's own its
/// lane's part.
struct Rewrite<'a> {
    cell: &'a Cell,
    lane_bufs: &'a HashMap<Var, Var>,
    lane: Var,
    at: Var,
}

impl Rewrite<'_> {
    fn stmt(&self, s: &Stmt) -> Stmt {
        let block = |b: &[Stmt]| b.iter().map(|s| self.stmt(s)).collect::<Vec<_>>();
        match s {
            Stmt::Let { var, elem, value } => match self.lane_bufs.get(var) {
                Some(buf) => self.store_lane(*buf, self.expr(value)),
                None => Stmt::Let {
                    var: *var,
                    elem: *elem,
                    value: self.expr(value),
                },
            },
            Stmt::Set { var, value } => match self.lane_bufs.get(var) {
                Some(buf) => self.store_lane(*buf, self.expr(value)),
                None => Stmt::Set {
                    var: *var,
                    value: self.expr(value),
                },
            },
            Stmt::Store { buf, index, value } => Stmt::Store {
                buf: *buf,
                index: self.index(*buf, index),
                value: self.expr(value),
            },
            Stmt::For {
                index,
                count,
                parallel,
                body,
            } => Stmt::For {
                index: *index,
                count: self.expr(count),
                parallel: *parallel,
                body: block(body),
            },
            Stmt::If {
                cond,
                then,
                otherwise,
            } => Stmt::If {
                cond: self.expr(cond),
                then: block(then),
                otherwise: block(otherwise),
            },
            s => s.clone(),
        }
    }

    fn store_lane(&self, buf: Var, value: Expr) -> Stmt {
        Stmt::Store {
            buf,
            index: Expr::Var(self.lane),
            value,
        }
    }

    /// `index` into `buf`, offset to the lane's part of a cell's buffer.
    fn index(&self, buf: Var, index: &Expr) -> Expr {
        let index = self.expr(index);
        match self.cell.buffers.get(&buf) {
            Some(len) => Expr::add(Expr::mul(Expr::Var(self.lane), Expr::Int(*len)), index),
            None => index,
        }
    }

    fn expr(&self, e: &Expr) -> Expr {
        match e {
            Expr::Var(v) if *v == self.cell.index => Expr::Var(self.at),
            Expr::Var(v) => match self.lane_bufs.get(v) {
                Some(buf) => Expr::load(*buf, Expr::Var(self.lane)),
                None => e.clone(),
            },
            Expr::Load { buf, index } => Expr::load(*buf, self.index(*buf, index)),
            Expr::Addr { buf, index } => Expr::Addr {
                buf: *buf,
                index: Box::new(self.index(*buf, index)),
            },
            Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| self.expr(a)).collect()),
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => e.clone(),
        }
    }
}

/// Whether the loop `s` is short enough for the C compiler to unroll
/// whole (see [`UNROLLED_OPS`]): a known count times its operations, a
/// math function counted as many.
fn unrolled(s: &Stmt) -> bool {
    let Stmt::For {
        count: Expr::Int(n),
        body,
        ..
    } = s
    else {
        return false;
    };
    let cheap = |op: &str| {
        !op.starts_with("f.") || matches!(op, "f.+" | "f.-" | "f.*" | "f.max" | "f.min" | "f.neg" | "f.abs")
    };
    let mut ops = 0u64;
    let mut nested = false;
    Stmt::each(body, &mut |s| {
        nested |= matches!(s, Stmt::For { .. } | Stmt::If { .. });
        each_expr_of(s, &mut |e| {
            each_expr(e, &mut |x| {
                ops += match x {
                    Expr::Op { op, .. } if !cheap(op) => 32,
                    Expr::Op { .. } | Expr::Load { .. } => 1,
                    _ => 0,
                }
            })
        });
    });
    !nested && u64::try_from(*n).unwrap_or(u64::MAX).saturating_mul(ops) <= UNROLLED_OPS
}

fn mentions_any(e: &Expr, vars: &HashSet<Var>) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= vars.contains(&v));
    found
}

/// The variables declared in `stmts`, at any depth.
fn declared_in(stmts: &[Stmt], out: &mut HashSet<Var>) {
    Stmt::each(stmts, &mut |s| match s {
        Stmt::Let { var, .. } => {
            out.insert(*var);
        }
        Stmt::For { index, .. } => {
            out.insert(*index);
        }
        _ => {}
    });
}

/// `f` on every expression of `stmts`, at any depth.
fn each_stmt_expr(stmts: &[&Stmt], f: &mut dyn FnMut(&Expr)) {
    for s in stmts {
        Stmt::each(std::slice::from_ref(*s), &mut |s| each_expr_of(s, f));
    }
}

/// `f` on each expression `s` holds itself (not those of its body).
fn each_expr_of(s: &Stmt, f: &mut dyn FnMut(&Expr)) {
    match s {
        Stmt::Let { value, .. } | Stmt::Set { value, .. } => f(value),
        Stmt::Store { index, value, .. } => {
            f(index);
            f(value);
        }
        Stmt::For { count, .. } => f(count),
        Stmt::If { cond, .. } => f(cond),
        _ => {}
    }
}

/// `f` on `e` and every expression inside it.
fn each_expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match e {
        Expr::Load { index, .. } | Expr::Addr { index, .. } => each_expr(index, f),
        Expr::Op { args, .. } => args.iter().for_each(|a| each_expr(a, f)),
        _ => {}
    }
}
