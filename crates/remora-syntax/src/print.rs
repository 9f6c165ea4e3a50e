//! Printing the desugared tree in the format of `remora parse`
//! (core.md §1.3): scalars bare, literals as `(array [d …] atom …)`,
//! applications uncurried, lambdas as `(λ ((x Int)) body)`, types in
//! `(A T s)` form, records as `{x : [] = e, …}`, projections as `(e . x)`.
//!
//! What is printed reads back (with [`crate::Dialect::Tree`]) as the same
//! tree: the round trip is tested over the whole suite.

use crate::ast::*;
use crate::parser::{UNBOX_TEMP, names_a_type};
use std::fmt::Write;

pub use crate::float::format_float;

/// A program, one declaration a line.
pub fn program(p: &Program) -> String {
    let mut out = String::new();
    for d in &p.decls {
        decl(&mut out, d);
        out.push('\n');
    }
    out
}

pub fn expr_to_string(e: &Expr) -> String {
    let mut out = String::new();
    expr(&mut out, e);
    out
}

thread_local! {
    /// Whether records and projections print in source syntax.
    static SOURCE_RECORDS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` with records printed as source writes them, `{(x [] e) …}` and
/// `(field e x)`, so that the text runs (`remora elaborate`); everything
/// else as `remora parse` prints it.
pub fn with_source_records<T>(f: impl FnOnce() -> T) -> T {
    let before = SOURCE_RECORDS.with(|s| s.replace(true));
    let r = f();
    SOURCE_RECORDS.with(|s| s.set(before));
    r
}

pub fn type_to_string(t: &Type) -> String {
    let mut out = String::new();
    ty(&mut out, t);
    out
}

pub fn ispace_to_string(i: &Ispace) -> String {
    let mut out = String::new();
    ispace(&mut out, i);
    out
}

fn decl(out: &mut String, d: &Decl) {
    match &d.kind {
        DeclKind::Def(b) => {
            out.push_str("(def ");
            bind(out, b);
            out.push(')');
        }
        DeclKind::Entry {
            name,
            params,
            ret,
            body,
        } => {
            let _ = write!(out, "(entry ({}", name.name);
            signature_rest(out, params, ret.as_ref());
            out.push_str(") ");
            expr(out, body);
            out.push(')');
        }
        DeclKind::Expr(e) => expr(out, e),
    }
}

fn signature_rest(out: &mut String, params: &[Param], ret: Option<&Type>) {
    for p in params {
        out.push(' ');
        param(out, p);
    }
    if let Some(t) = ret {
        out.push_str(" : ");
        ty(out, t);
    }
}

fn shape_lit(out: &mut String, shape: &[u64]) {
    out.push('[');
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{d}");
    }
    out.push(']');
}

pub fn expr(out: &mut String, e: &Expr) {
    match &e.kind {
        ExprKind::Array { shape, atoms } => {
            if let ([], [a]) = (shape.as_slice(), atoms.as_slice()) {
                atom(out, a);
            } else {
                out.push_str("(array ");
                shape_lit(out, shape);
                for a in atoms {
                    out.push(' ');
                    atom(out, a);
                }
                out.push(')');
            }
        }
        ExprKind::EmptyArray { shape, elem } | ExprKind::EmptyFrame { shape, elem } => {
            let head = if matches!(e.kind, ExprKind::EmptyArray { .. }) {
                "(empty-array "
            } else {
                "(empty-frame "
            };
            out.push_str(head);
            shape_lit(out, shape);
            out.push(' ');
            ty(out, elem);
            out.push(')');
        }
        ExprKind::Frame { shape, elems } => {
            // `[&t]` would print as `(frame [1] &t)`, which reads back as an
            // empty frame of type `&t`: print the brackets it came from.
            if let [only] = elems.as_slice()
                && matches!(&only.kind, ExprKind::Var(v) if names_a_type(&v.name))
                && !shape.is_empty()
                && shape.iter().all(|d| *d == 1)
            {
                out.push_str(&"[".repeat(shape.len()));
                expr(out, only);
                out.push_str(&"]".repeat(shape.len()));
                return;
            }
            out.push_str("(frame ");
            shape_lit(out, shape);
            for x in elems {
                out.push(' ');
                expr(out, x);
            }
            out.push(')');
        }
        ExprKind::Var(v) => out.push_str(&v.name),
        ExprKind::App { .. } => {
            // Uncurry the spine: ((f a) b) prints as (f a b).
            let mut args = Vec::new();
            let mut f = e;
            while let ExprKind::App { func, arg } = &f.kind {
                args.push(arg);
                f = func;
            }
            args.reverse();
            // A variable named like a form keyword in head position (`if`,
            // `rerank`, the printed `empty-array`) is applied with `@`, so that
            // it reads back as an application.
            if let ExprKind::Var(v) = &f.kind
                && matches!(v.name.as_str(), "if" | "rerank" | "empty-array" | "empty-frame")
            {
                let _ = write!(out, "(@ {} _ _", v.name);
                for a in &args {
                    out.push(' ');
                    expr(out, a);
                }
                out.push(')');
                return;
            }
            // `(f . x)` would read back as a field projection: print an
            // application to the variable `.` curried, `((f .) x)`.
            if let [dot, _] = args.as_slice()
                && matches!(&dot.kind, ExprKind::Var(v) if v.name == ".")
            {
                out.push_str("((");
                expr(out, f);
                out.push_str(" .) ");
                expr(out, args[1]);
                out.push(')');
                return;
            }
            out.push('(');
            expr(out, f);
            for a in &args {
                out.push(' ');
                expr(out, a);
            }
            out.push(')');
        }
        ExprKind::TApp { func, arg } => {
            out.push_str("(t-app ");
            expr(out, func);
            out.push(' ');
            // An array type here came from `*t` (a written `[T s]` or
            // `(A T s)` is split into t-app and i-app): print it as `*t`, which
            // reads back unsplit.
            match &arg.kind {
                TypeKind::Array { elem, shape: s }
                    if matches!((&elem.kind, &s.kind), (TypeKind::Var(a), ShapeKind::Var(b))
                        if a.name.strip_prefix('&').is_some_and(|n| Some(n) == b.name.strip_prefix('@'))) =>
                {
                    if let TypeKind::Var(a) = &elem.kind {
                        out.push('*');
                        out.push_str(&a.name[1..]);
                    }
                }
                _ => ty(out, arg),
            }
            out.push(')');
        }
        ExprKind::IApp { func, arg } => {
            out.push_str("(i-app ");
            expr(out, func);
            out.push(' ');
            ispace(out, arg);
            out.push(')');
        }
        ExprKind::Unbox { .. } => unbox(out, e),
        ExprKind::Let { binds, body } => {
            out.push_str("(let (");
            for (i, b) in binds.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                bind(out, b);
            }
            out.push_str(") ");
            expr(out, body);
            out.push(')');
        }
        ExprKind::Record(fields) if SOURCE_RECORDS.with(|s| s.get()) => {
            out.push('{');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "({} ", f.name.name);
                shape(out, &f.cell);
                out.push(' ');
                expr(out, &f.value);
                out.push(')');
            }
            out.push('}');
        }
        ExprKind::Field { record, field } if SOURCE_RECORDS.with(|s| s.get()) => {
            out.push_str("(field ");
            expr(out, record);
            let _ = write!(out, " {})", field.name);
        }
        ExprKind::Record(fields) => {
            out.push('{');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{} : ", f.name.name);
                shape(out, &f.cell);
                out.push_str(" = ");
                expr(out, &f.value);
            }
            out.push('}');
        }
        ExprKind::Field { record, field } => {
            out.push('(');
            expr(out, record);
            let _ = write!(out, " . {})", field.name);
        }
        ExprKind::If {
            cond,
            then,
            otherwise,
        } => {
            out.push_str("(if ");
            expr(out, cond);
            out.push(' ');
            expr(out, then);
            out.push(' ');
            expr(out, otherwise);
            out.push(')');
        }
        ExprKind::Rerank { ranks, func } => {
            out.push_str("(rerank (");
            for (i, r) in ranks.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                rank(out, *r);
            }
            out.push_str(") ");
            expr(out, func);
            out.push(')');
        }
        ExprKind::Error => out.push_str("<error>"),
    }
}

/// Nested unboxes made by desugaring a multi-witness `unbox` print as the
/// one form they came from, so that they read back the same.
fn unbox(out: &mut String, e: &Expr) {
    let mut witnesses = Vec::new();
    let mut cur = e;
    let (var, boxed, body) = loop {
        let ExprKind::Unbox {
            witness,
            var,
            boxed,
            body,
        } = &cur.kind
        else {
            return;
        };
        witnesses.push(witness);
        if var.name == UNBOX_TEMP
            && let ExprKind::Unbox { boxed: inner, .. } = &body.kind
            && matches!(&inner.kind, ExprKind::Var(v) if v.name == UNBOX_TEMP)
        {
            cur = body;
            continue;
        }
        break (var, boxed, body);
    };
    // The first unbox of the chain names the real box expression.
    let first_boxed = match &e.kind {
        ExprKind::Unbox { boxed, .. } => boxed,
        _ => boxed,
    };
    out.push_str("(unbox (");
    for w in &witnesses {
        out.push_str(&w.name.name);
        out.push(' ');
    }
    let _ = write!(out, "{} ", var.name);
    expr(out, first_boxed);
    out.push_str(") ");
    expr(out, body);
    out.push(')');
}

fn rank(out: &mut String, r: Rank) {
    match r {
        Rank::Nat(n) => {
            let _ = write!(out, "{n}");
        }
        Rank::All => out.push_str("all"),
    }
}

pub fn atom(out: &mut String, a: &Atom) {
    match &a.kind {
        AtomKind::Bool(b) => out.push_str(if *b { "#t" } else { "#f" }),
        AtomKind::Int(i) => {
            let _ = write!(out, "{i}");
        }
        // A literal too large for f32 is infinite; `Infinity` would read
        // back as a variable, so print a literal that overflows the same way.
        AtomKind::Float(f) if f.is_infinite() => out.push_str(if *f > 0.0 { "1.0e39" } else { "-1.0e39" }),
        AtomKind::Float(f) => out.push_str(&format_float(*f)),
        AtomKind::Lambda { param: p, body } => {
            out.push_str("(λ (");
            param(out, p);
            out.push_str(") ");
            expr(out, body);
            out.push(')');
        }
        AtomKind::TLambda { param, body } => {
            let _ = write!(out, "(tλ ({}) ", param.name.name);
            expr(out, body);
            out.push(')');
        }
        AtomKind::ILambda { param, body } => {
            let _ = write!(out, "(iλ ({}) ", param.name.name);
            expr(out, body);
            out.push(')');
        }
        AtomKind::Box { witness, body, ty: t } => {
            out.push_str("(box ");
            if let Some(w) = witness {
                out.push('(');
                ispace(out, w);
                out.push_str(") ");
            }
            expr(out, body);
            if let Some(t) = t {
                out.push(' ');
                ty(out, t);
            }
            out.push(')');
        }
        AtomKind::Error => out.push_str("<error>"),
    }
}

fn param(out: &mut String, p: &Param) {
    match &p.ann {
        ParamAnn::Infer => out.push_str(&p.name.name),
        ParamAnn::Type(t) => {
            let _ = write!(out, "({} ", p.name.name);
            ty(out, t);
            out.push(')');
        }
        ParamAnn::Rank(r) => {
            let _ = write!(out, "({} ", p.name.name);
            rank(out, *r);
            out.push(')');
        }
    }
}

pub fn bind(out: &mut String, b: &Bind) {
    match &b.kind {
        BindKind::Val {
            name,
            ty: None,
            expr: e,
        } => {
            let _ = write!(out, "(val {} ", name.name);
            expr(out, e);
            out.push(')');
        }
        BindKind::Val {
            name,
            ty: Some(t),
            expr: e,
        } => {
            let _ = write!(out, "(val ({} : ", name.name);
            ty(out, t);
            out.push_str(") ");
            expr(out, e);
            out.push(')');
        }
        BindKind::Fun {
            name,
            params,
            ret,
            body,
        } => {
            let _ = write!(out, "(fun ({}", name.name);
            signature_rest(out, params, ret.as_ref());
            out.push_str(") ");
            expr(out, body);
            out.push(')');
        }
        BindKind::TFun {
            name,
            params,
            ret,
            body,
        } => {
            let names: Vec<&str> = params.iter().map(|p| p.name.name.as_str()).collect();
            quantified_fun(out, "t-fun", &name.name, &names, ret.as_ref(), body);
        }
        BindKind::IFun {
            name,
            params,
            ret,
            body,
        } => {
            let names: Vec<&str> = params.iter().map(|p| p.name.name.as_str()).collect();
            quantified_fun(out, "i-fun", &name.name, &names, ret.as_ref(), body);
        }
        BindKind::TypeAlias { param, ty: t } => {
            let _ = write!(out, "(type {} ", param.name.name);
            ty(out, t);
            out.push(')');
        }
        BindKind::IspaceAlias { param, ispace: i } => {
            let _ = write!(out, "(ispace {} ", param.name.name);
            ispace(out, i);
            out.push(')');
        }
    }
}

/// `(t-fun (f (&t …) : R) body)` / `(i-fun (f ($n …) : R) body)`.
fn quantified_fun(
    out: &mut String,
    keyword: &str,
    name: &str,
    params: &[&str],
    ret: Option<&Type>,
    body: &Expr,
) {
    let _ = write!(out, "({keyword} ({name} ({})", params.join(" "));
    signature_rest(out, &[], ret);
    out.push_str(") ");
    expr(out, body);
    out.push(')');
}

pub fn ty(out: &mut String, t: &Type) {
    match &t.kind {
        TypeKind::Var(v) => out.push_str(&v.name),
        TypeKind::Int => out.push_str("Int"),
        TypeKind::Bool => out.push_str("Bool"),
        TypeKind::Float => out.push_str("Float"),
        TypeKind::Array { elem, shape: s } => {
            out.push_str("(A ");
            ty(out, elem);
            out.push(' ');
            shape(out, s);
            out.push(')');
        }
        TypeKind::Arrow { param, result } => {
            out.push_str("(-> ");
            ty(out, param);
            out.push(' ');
            ty(out, result);
            out.push(')');
        }
        TypeKind::Forall { param, body } => binder(out, "∀", &param.name.name, body),
        TypeKind::Pi { param, body } => binder(out, "Π", &param.name.name, body),
        TypeKind::Sigma { param, body } => binder(out, "Σ", &param.name.name, body),
        TypeKind::Record(fields) => {
            out.push('{');
            for (i, (name, t)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "({} ", name.name);
                ty(out, t);
                out.push(')');
            }
            out.push('}');
        }
        TypeKind::Hole => out.push('_'),
        TypeKind::Error => out.push_str("<error>"),
    }
}

/// `(∀ (&t) T)`, `(Π ($n) T)`, `(Σ ($n) T)`.
fn binder(out: &mut String, quantifier: &str, param: &str, body: &Type) {
    let _ = write!(out, "({quantifier} ({param}) ");
    ty(out, body);
    out.push(')');
}

pub fn ispace(out: &mut String, i: &Ispace) {
    match i {
        Ispace::Dim(d) => dim(out, d),
        Ispace::Shape(s) => shape(out, s),
        Ispace::Hole(_) => out.push('_'),
    }
}

pub fn dim(out: &mut String, d: &Dim) {
    let (op, args) = match &d.kind {
        DimKind::Nat(n) => {
            let _ = write!(out, "{n}");
            return;
        }
        DimKind::Var(v) => {
            out.push_str(&v.name);
            return;
        }
        DimKind::Hole => {
            out.push('_');
            return;
        }
        DimKind::Error => {
            out.push_str("<error>");
            return;
        }
        DimKind::Add(a) => ("+", a),
        DimKind::Mul(a) => ("*", a),
        DimKind::Sub(a) => ("-", a),
    };
    out.push('(');
    out.push_str(op);
    for a in args {
        out.push(' ');
        dim(out, a);
    }
    out.push(')');
}

pub fn shape(out: &mut String, s: &Shape) {
    match &s.kind {
        ShapeKind::Var(v) => out.push_str(&v.name),
        ShapeKind::Splice(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                ispace(out, item);
            }
            out.push(']');
        }
        ShapeKind::Error => out.push_str("<error>"),
    }
}
