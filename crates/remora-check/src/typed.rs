//! The typed tree: what the checker hands to the interpreter and the
//! compiler. Every node carries its type; every application the decisions
//! of the application rule (its principal frame, the function's and the
//! argument's frames and the argument's cell shape); every `t-app`/`i-app`
//! its argument. Names are resolved to numbers, aliases are gone, and
//! `fun`/`t-fun`/`i-fun` bindings are `let`s of lambdas.

use remora_syntax::Span;
use remora_types::{Atom, IVar, Index, Lifted, TVar, Type};

/// A value variable, numbered by the checker (see [`crate::Checked::var_names`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

#[derive(Clone, Debug, PartialEq)]
pub struct TExpr {
    pub kind: TExprKind,
    pub ty: Type,
    pub span: Span,
}

impl TExpr {
    /// An application spine `(((f a1) a2) … ak)`: its head `f` and its
    /// arguments, first first, each with its lifting (`f` itself, with no
    /// arguments, when `self` is no application).
    pub fn spine(&self) -> (&TExpr, Vec<(&TExpr, &Lifted)>) {
        let mut spine = Vec::new();
        let mut head = self;
        while let TExprKind::App { func, arg, lifted } = &head.kind {
            spine.push((&**arg, lifted));
            head = func;
        }
        spine.reverse();
        (head, spine)
    }

    /// The first expression in `self`, itself included, of which `pred`
    /// holds, in written order (preorder): an array's lambda and box
    /// bodies, a frame's elements, an application's function then its
    /// argument, and so on. Iterative, so a program nested as deep as the
    /// checker allows is walked in constant stack.
    pub fn find(&self, pred: &mut dyn FnMut(&TExpr) -> bool) -> Option<&TExpr> {
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            if pred(e) {
                return Some(e);
            }
            let before = stack.len();
            e.push_children(&mut stack);
            stack[before..].reverse();
        }
        None
    }

    /// Whether `pred` holds of `self` or of any expression in it.
    pub fn any(&self, pred: &mut dyn FnMut(&TExpr) -> bool) -> bool {
        self.find(pred).is_some()
    }

    /// The expressions directly inside this one, in written order.
    pub fn push_children<'a>(&'a self, out: &mut Vec<&'a TExpr>) {
        match &self.kind {
            TExprKind::Var(_) | TExprKind::Intrinsic(_) => {}
            TExprKind::Array { atoms, .. } => {
                for a in atoms {
                    match &a.kind {
                        TAtomKind::Lambda { body, .. }
                        | TAtomKind::TLambda { body, .. }
                        | TAtomKind::ILambda { body, .. }
                        | TAtomKind::Box { body, .. } => out.push(body),
                        TAtomKind::Bool(_) | TAtomKind::Int(_) | TAtomKind::Float(_) => {}
                    }
                }
            }
            TExprKind::Frame { elems, .. } => out.extend(elems),
            TExprKind::App { func, arg, .. } => {
                out.push(func);
                out.push(arg);
            }
            TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => out.push(func),
            TExprKind::Unbox { boxed, body, .. } => {
                out.push(boxed);
                out.push(body);
            }
            TExprKind::Let { value, body, .. } => {
                out.push(value);
                out.push(body);
            }
            TExprKind::Record(fields) => out.extend(fields.iter().map(|(_, x)| x)),
            TExprKind::Field { record, .. } => out.push(record),
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                out.push(cond);
                out.push(then);
                out.push(otherwise);
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum TExprKind {
    /// An array literal; no atoms for an empty array.
    Array {
        shape: Vec<u64>,
        atoms: Vec<TAtom>,
    },
    /// A frame of expressions; none for an empty frame.
    Frame {
        shape: Vec<u64>,
        elems: Vec<TExpr>,
    },
    Var(VarId),
    /// One of the 76 intrinsics of core.md §2.
    Intrinsic(&'static str),
    /// `(f a)`, lifted as `lifted` says.
    App {
        func: Box<TExpr>,
        arg: Box<TExpr>,
        lifted: Lifted,
    },
    TApp {
        func: Box<TExpr>,
        arg: Atom,
    },
    IApp {
        func: Box<TExpr>,
        arg: Index,
    },
    /// `(unbox (w x boxed) body)`: over an array of boxes, once per box.
    /// `witness` is the variable the box's witness value binds; `binder`
    /// the one the program's name stands for — the same, except when a
    /// shape binder unboxes a dimension witness (it is then `[witness]`).
    Unbox {
        witness: IVar,
        binder: IVar,
        var: VarId,
        boxed: Box<TExpr>,
        body: Box<TExpr>,
    },
    Let {
        var: VarId,
        value: Box<TExpr>,
        body: Box<TExpr>,
    },
    /// `{(x cell e) …}`: fields in written order, lifted to the principal frame.
    Record(Vec<(String, TExpr)>),
    Field {
        record: Box<TExpr>,
        field: String,
    },
    If {
        cond: Box<TExpr>,
        then: Box<TExpr>,
        otherwise: Box<TExpr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct TAtom {
    pub kind: TAtomKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TAtomKind {
    Bool(bool),
    Int(i64),
    Float(f32),
    // (The bodies are boxed: an atom is then a few words, and a literal of
    // millions of numbers is millions of small atoms.)
    Lambda {
        param: VarId,
        body: Box<TExpr>,
    },
    TLambda {
        param: TVar,
        body: Box<TExpr>,
    },
    ILambda {
        param: IVar,
        body: Box<TExpr>,
    },
    /// A box with its witness and payload.
    Box {
        witness: Index,
        body: Box<TExpr>,
    },
}

/// A checked declaration.
#[derive(Clone, Debug, PartialEq)]
pub enum TDecl {
    /// `(def …)` and `(entry …)` bind a variable; an entry's value is its
    /// curried function (or its value, without parameters).
    Def {
        var: VarId,
        name: String,
        entry: bool,
        value: TExpr,
    },
    /// A bare top-level expression.
    Expr(TExpr),
}

/// Where a run starts (core.md §4.2): the one entry named `entry`, or the
/// reason there is none to run.
#[derive(Clone, Copy, Debug)]
pub enum EntryToRun<'p> {
    /// The entry's variable and value.
    One(VarId, &'p TExpr),
    /// The program declares no entry at all (it may be a script of bare
    /// expressions).
    NoEntries,
    /// The program has entries, none named `entry`.
    Missing,
    /// More than one entry is named `entry`; the span is the second one's
    /// value, where the mistake is reported.
    Several(Span),
}

/// `d`'s variable and value, if it is an entry named `entry`.
pub fn entry_named<'p>(d: &'p TDecl, entry: &str) -> Option<(VarId, &'p TExpr)> {
    match d {
        TDecl::Def {
            entry: true,
            name,
            var,
            value,
        } if name == entry => Some((*var, value)),
        _ => None,
    }
}

/// The entry named `entry` that a run of `decls` starts from: the one
/// decision the interpreter and the compiled engine both make.
pub fn entry_to_run<'p>(decls: &'p [TDecl], entry: &str) -> EntryToRun<'p> {
    let mut named = decls.iter().filter_map(|d| entry_named(d, entry));
    match (named.next(), named.next()) {
        (Some((var, value)), None) => EntryToRun::One(var, value),
        (Some(_), Some((_, second))) => EntryToRun::Several(second.span),
        (None, _) if decls.iter().any(|d| matches!(d, TDecl::Def { entry: true, .. })) => EntryToRun::Missing,
        (None, _) => EntryToRun::NoEntries,
    }
}
