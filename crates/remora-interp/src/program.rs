//! Running a program: its entry (`main` unless another is named) applied
//! to the command-line arguments, or, without entries, each bare top-level
//! expression in order (script mode, extensions.md §2).

use crate::eval::{Env, Interpreter, RunError, Value};
use remora_check::typed::{TAtomKind, TDecl, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_types::{Atom, Truth, Type};

/// What a program produced.
pub enum Outcome<'p> {
    /// The entry's value.
    Entry(Value<'p>),
    /// Script mode: the value of each bare expression.
    Script(Vec<Value<'p>>),
}

/// Why a program could not run.
#[derive(Debug)]
pub enum Failure {
    /// A positioned run-time error.
    Run(RunError),
    /// About the program or its arguments as a whole.
    Plain(String),
}

/// An argument for an entry's parameter.
#[derive(Clone)]
pub enum EntryArg<'p> {
    /// A checked expression (a command-line argument), with its type.
    Expr(&'p TExpr),
    /// A value read from a data file (Futhark data, `.npy`): its type is
    /// its atoms' type at its shape.
    Data(Value<'p>),
}

/// The type of a value read from data: Int, Float or Bool at its shape.
fn data_type(v: &Value<'_>) -> Option<Type> {
    use remora_value::Data;
    let atom = match &v.data {
        Data::Int(_) => Atom::Int,
        Data::Float(_) => Atom::Float,
        Data::Bool(_) => Atom::Bool,
        Data::Atoms(_) | Data::Records(_) => return None,
    };
    let dims = v.shape.iter().map(|d| remora_types::Dim::nat(*d as u64));
    Some(Type {
        atom,
        shape: remora_types::Shape::from_dims(dims),
    })
}

/// The type of the `k`th parameter (from 0) of the named entry, if there
/// is one.
pub fn entry_parameter(decls: &[TDecl], entry: &str, k: usize) -> Option<Type> {
    find_entry(decls, entry).and_then(|(_, value)| parameters(&value.ty).get(k).cloned())
}

/// Whether data of `atom` (`"Int"`, `"Float"` or `"Bool"`) and `shape` can
/// be the `k`th argument of the entry: `Err` with the message an argument
/// of the wrong type gets, so that a data file's header is checked before
/// its body is read.
pub fn check_data_argument(
    decls: &[TDecl],
    entry: &str,
    k: usize,
    atom: &str,
    shape: &[usize],
    show: &dyn Fn(&Type) -> String,
) -> Result<(), String> {
    let Some(param) = entry_parameter(decls, entry, k) else {
        return Ok(());
    };
    let atom = match atom {
        "Int" => Atom::Int,
        "Float" => Atom::Float,
        _ => Atom::Bool,
    };
    let ty = Type {
        atom,
        shape: remora_types::Shape::from_dims(shape.iter().map(|d| remora_types::Dim::nat(*d as u64))),
    };
    if ty.equals(&param) == Truth::Yes {
        return Ok(());
    }
    Err(format!(
        "argument {} of {entry} has type {}, but the parameter has type {}",
        k + 1,
        show(&ty),
        show(&param)
    ))
}

/// The number of parameters of the named entry, if there is one.
pub fn entry_arity(decls: &[TDecl], entry: &str) -> Option<usize> {
    find_entry(decls, entry).map(|(_, value)| parameters(&value.ty).len())
}

/// The parameters of the entry named `entry`, each written `(name TYPE)`
/// with the names and types as `var_name` and `show` give them.
pub fn entry_parameters(
    decls: &[TDecl],
    entry: &str,
    show: &dyn Fn(&Type) -> String,
    var_name: &dyn Fn(VarId) -> String,
) -> Option<Vec<String>> {
    let (_, value) = find_entry(decls, entry)?;
    let vars = parameter_vars(value);
    Some(
        parameters(&value.ty)
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let name = vars.get(k).map(|v| var_name(*v)).unwrap_or_else(|| "_".into());
                format!("({name} {})", show(t))
            })
            .collect(),
    )
}

/// The (first) entry named `entry`: its variable and its definition.
fn find_entry<'p>(decls: &'p [TDecl], entry: &str) -> Option<(VarId, &'p TExpr)> {
    decls.iter().find_map(|d| match d {
        TDecl::Def {
            entry: true,
            name,
            var,
            value,
            ..
        } if name == entry => Some((*var, value)),
        _ => None,
    })
}

/// Runs `entry` with `args`, or the bare expressions when the program has
/// no entry at all.
pub fn run<'p>(
    interp: &mut Interpreter,
    decls: &'p [TDecl],
    entry: &str,
    args: Vec<EntryArg<'p>>,
    show: &dyn Fn(&Type) -> String,
    var_name: &dyn Fn(VarId) -> String,
) -> Result<Outcome<'p>, Failure> {
    let entries: Vec<&TDecl> = decls
        .iter()
        .filter(|d| matches!(d, TDecl::Def { entry: true, name, .. } if name == entry))
        .collect();
    let has_entries = decls.iter().any(|d| matches!(d, TDecl::Def { entry: true, .. }));
    let (env, shown) = interp.program(decls).map_err(Failure::Run)?;
    let target = match entries.as_slice() {
        [TDecl::Def { var, value, .. }] => (var, value),
        [] if !has_entries && args.is_empty() && !shown.is_empty() => return Ok(Outcome::Script(shown)),
        [] => return Err(Failure::Plain(format!("program has no {entry} entry"))),
        _ => return Err(Failure::Plain(format!("multiple {entry} entries"))),
    };
    let (var, value) = target;
    let params = parameters(&value.ty);
    let names = parameter_vars(value);
    if params.len() != args.len() {
        return Err(Failure::Plain(format!(
            "{entry} expects {} arguments but got {}",
            params.len(),
            args.len()
        )));
    }
    let mut values = Vec::with_capacity(args.len());
    for (k, (arg, param)) in args.into_iter().zip(&params).enumerate() {
        let (ty, span) = match &arg {
            EntryArg::Expr(e) => (Some(e.ty.clone()), e.span),
            EntryArg::Data(v) => (data_type(v), value.span),
        };
        // core.md §6 (2): arguments are checked against the parameter types.
        if ty.as_ref().map(|t| t.equals(param)) != Some(Truth::Yes) {
            let param_name = names
                .get(k)
                .map(|v| format!(" `{}`", var_name(*v)))
                .unwrap_or_default();
            return Err(Failure::Plain(format!(
                "argument {} of {entry} has type {}, but the parameter{param_name} has type {}",
                k + 1,
                ty.as_ref().map_or("a box".into(), show),
                show(param)
            )));
        }
        let v = match arg {
            EntryArg::Expr(e) => interp.eval(e, &env).map_err(Failure::Run)?,
            EntryArg::Data(v) => v,
        };
        values.push((v, span));
    }
    apply_entry(interp, &env, *var, value, values).map(Outcome::Entry)
}

/// The entry bound to `var` (defined by `value`) applied to argument values
/// already checked against its parameters, each with the position to blame.
pub fn apply_entry<'p>(
    interp: &mut Interpreter,
    env: &Env<'p>,
    var: VarId,
    value: &'p TExpr,
    args: Vec<(Value<'p>, Span)>,
) -> Result<Value<'p>, Failure> {
    let mut f = Interpreter::lookup(env, var)
        .ok_or_else(|| Failure::Plain("internal error: no entry value".into()))?;
    let mut ty = value.ty.clone();
    for (a, span) in args {
        let result = match &ty.atom {
            Atom::Arrow(_, r) => (**r).clone(),
            _ => return Err(Failure::Plain("internal error: entry is not a function".into())),
        };
        let cell: Vec<usize> = a.shape.clone();
        f = interp
            .apply(&f, a, &cell, &result, env, span)
            .map_err(Failure::Run)?;
        ty = result;
    }
    Ok(f)
}

/// A program's entry called from Rust with argument values (a benchmark,
/// a data file): the declarations are evaluated, then the entry applied.
/// The values are trusted to match the parameters' types.
pub fn call_entry<'p>(
    interp: &mut Interpreter,
    decls: &'p [TDecl],
    entry: &str,
    args: Vec<Value<'p>>,
) -> Result<Value<'p>, Failure> {
    let (env, _) = interp.program(decls).map_err(Failure::Run)?;
    let Some((var, value)) = find_entry(decls, entry) else {
        return Err(Failure::Plain(format!("program has no {entry} entry")));
    };
    let args = args.into_iter().map(|a| (a, value.span)).collect();
    apply_entry(interp, &env, var, value, args)
}

/// The parameter types of a curried function type.
fn parameters(ty: &Type) -> Vec<Type> {
    let mut out = Vec::new();
    let mut t = ty;
    while let Atom::Arrow(p, r) = &t.atom {
        out.push((**p).clone());
        t = r;
    }
    out
}

/// The parameter variables of an entry's curried lambdas.
fn parameter_vars(value: &TExpr) -> Vec<VarId> {
    let mut out = Vec::new();
    let mut e = value;
    while let TExprKind::Array { atoms, .. } = &e.kind {
        match atoms.as_slice() {
            [a] => match &a.kind {
                TAtomKind::Lambda { param, body } => {
                    out.push(*param);
                    e = body;
                }
                _ => break,
            },
            _ => break,
        }
    }
    out
}
