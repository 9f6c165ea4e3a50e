//! Running a program: its entry (`main` unless another is named) applied
//! to the command-line arguments, or, without entries, each bare top-level
//! expression in order (script mode, extensions.md §2).

use crate::eval::{Env, IndexVal, Interpreter, RunError, Value};
use remora_check::infer::{Solution, Unknowns};
use remora_check::typed::{EntryToRun, TAtomKind, TDecl, TExpr, TExprKind, VarId, entry_named, entry_to_run};
use remora_syntax::Span;
use remora_types::{Atom, IVar, TVar, Type};

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
/// is one (with the variables its arguments bind, if any).
pub fn entry_parameter(decls: &[TDecl], entry: &str, k: usize) -> Option<Type> {
    find_entry(decls, entry).and_then(|(_, value)| parameters(Signature::of(&value.ty).fun).get(k).cloned())
}

/// Whether data of `atom` (`"Int"`, `"Float"` or `"Bool"`) and `shape` can
/// be the `k`th argument of the entry: `Err` with the message an argument
/// of the wrong type gets, so that a data file's header is checked before
/// its body is read. (A parameter with variables is checked alone here;
/// whether the arguments agree on them is checked when the entry runs.)
pub fn check_data_argument(
    decls: &[TDecl],
    entry: &str,
    k: usize,
    atom: &str,
    shape: &[usize],
    show: &dyn Fn(&Type) -> String,
) -> Result<(), String> {
    let Some((_, value)) = find_entry(decls, entry) else {
        return Ok(());
    };
    let signature = Signature::of(&value.ty);
    let Some(param) = parameters(signature.fun).get(k).cloned() else {
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
    if !signature.fits(&param, &ty, Solution::default()).is_empty() {
        return Ok(());
    }
    Err(format!(
        "argument {} of {entry} has type {}, but the parameter has type {}",
        k + 1,
        show(&ty),
        show(&param)
    ))
}

/// An entry's type: the type and index variables its parameters leave
/// free (`(entry (main (xs [Float $n])) …)` is generalised over `$n`, as a
/// `fun` is), which its arguments bind when it runs, and the function
/// type under them.
struct Signature<'t> {
    binders: Vec<Binder>,
    fun: &'t Type,
}

#[derive(Clone, Copy, PartialEq)]
enum Binder {
    Type(TVar),
    Index(IVar),
}

impl<'t> Signature<'t> {
    /// The binders around a function type (none around anything else: an
    /// entry of no parameters is its value).
    fn of(ty: &'t Type) -> Signature<'t> {
        let mut binders = Vec::new();
        let mut t = ty;
        loop {
            let (binder, body) = match &t.atom {
                Atom::Forall(v, body) if t.shape.is_scalar() => (Binder::Type(*v), body),
                Atom::Pi(v, body) if t.shape.is_scalar() => (Binder::Index(*v), body),
                _ => break,
            };
            binders.push(binder);
            t = body;
        }
        if binders.is_empty() || !matches!(t.atom, Atom::Arrow(..)) {
            return Signature {
                binders: Vec::new(),
                fun: ty,
            };
        }
        Signature { binders, fun: t }
    }

    fn unknowns(&self) -> Unknowns {
        let mut u = Unknowns::default();
        for b in &self.binders {
            match b {
                Binder::Type(v) => u.types.insert(*v),
                Binder::Index(IVar::Dim(v)) => u.dims.insert(*v),
                Binder::Index(IVar::Shape(v)) => u.shapes.insert(*v),
            };
        }
        u
    }

    /// Every way an argument of type `arg` is the parameter `param` exactly
    /// (entries do not lift), given what earlier arguments bound.
    fn fits(&self, param: &Type, arg: &Type, sol: Solution) -> Vec<Solution> {
        let mut found = self.unknowns().match_type(param, arg, sol);
        found.dedup();
        found
    }
}

/// Whether `sol` gives binder `b` a value.
fn solves(sol: &Solution, b: Binder) -> bool {
    match b {
        Binder::Type(v) => sol.types.contains_key(&v),
        Binder::Index(IVar::Dim(v)) => sol.dims.contains_key(&v),
        Binder::Index(IVar::Shape(v)) => sol.shapes.contains_key(&v),
    }
}

/// Binder `b`'s value under `sol`, as a type (its shape, for an index) for
/// showing.
fn value_of(sol: &Solution, b: Binder) -> Option<Type> {
    match b {
        Binder::Type(v) => sol.types.get(&v).map(|a| Type::scalar(a.clone())),
        Binder::Index(IVar::Dim(v)) => sol
            .dims
            .get(&v)
            .map(|d| Type::array(Atom::Int, remora_types::Shape::from_dims([d.clone()]))),
        Binder::Index(IVar::Shape(v)) => sol.shapes.get(&v).map(|s| Type::array(Atom::Int, s.clone())),
    }
}

/// A binder as written (`$n`, `@s`, `&t`), or its value shown (`5`,
/// `[2 3]`, `Float`), by way of the program's type printer.
fn show_binder(b: Binder, value: Option<Type>, show: &dyn Fn(&Type) -> String) -> String {
    let as_type = value.unwrap_or_else(|| match b {
        Binder::Type(v) => Type::scalar(Atom::Var(v)),
        Binder::Index(IVar::Dim(v)) => Type::array(
            Atom::Int,
            remora_types::Shape::from_dims([remora_types::Dim::var(v)]),
        ),
        Binder::Index(IVar::Shape(v)) => Type::array(Atom::Int, remora_types::Shape::var(v)),
    });
    let shown = show(&as_type);
    let inner = match (b, shown.strip_prefix("[Int ").and_then(|x| x.strip_suffix(']'))) {
        (Binder::Index(IVar::Dim(_)), Some(inner)) => inner.to_string(),
        (Binder::Index(IVar::Shape(_)), Some(inner)) => format!("[{inner}]"),
        _ => shown.clone(),
    };
    match (b, as_type.shape.is_scalar()) {
        // The empty shape.
        (Binder::Index(IVar::Shape(_)), true) => "[]".into(),
        _ => inner,
    }
}

/// The number of parameters of the named entry, if there is one.
pub fn entry_arity(decls: &[TDecl], entry: &str) -> Option<usize> {
    find_entry(decls, entry).map(|(_, value)| parameters(Signature::of(&value.ty).fun).len())
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
        parameters(Signature::of(&value.ty).fun)
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
    decls.iter().find_map(|d| entry_named(d, entry))
}

/// A mistake of the program as a whole, placed at the start of its file
/// (unplaced when the program declares nothing).
fn at_start(decls: &[TDecl], message: String) -> Failure {
    match decls.first() {
        Some(TDecl::Def { value: e, .. } | TDecl::Expr(e)) => Failure::Run(RunError {
            span: Span::new(e.span.file, 0, 0),
            message,
        }),
        None => Failure::Plain(message),
    }
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
    let (env, shown) = interp.program(decls).map_err(Failure::Run)?;
    let (var, value) = match entry_to_run(decls, entry) {
        EntryToRun::One(var, value) => (var, value),
        EntryToRun::NoEntries if args.is_empty() && !shown.is_empty() => return Ok(Outcome::Script(shown)),
        EntryToRun::NoEntries | EntryToRun::Missing => {
            return Err(at_start(decls, format!("program has no {entry} entry")));
        }
        // (core.md §4.2's message, at the second entry's value.)
        EntryToRun::Several(second) => {
            return Err(Failure::Run(RunError {
                span: second,
                message: format!("multiple {entry} entries"),
            }));
        }
    };
    let signature = Signature::of(&value.ty);
    let params = parameters(signature.fun);
    let names = parameter_vars(value);
    // Mistakes in the arguments are placed at the argument (a
    // command-line expression) or, for one read from a data file and for
    // the arguments together, at the entry.
    let at = |span: Span, message: String| Failure::Run(RunError { span, message });
    if params.len() != args.len() {
        return Err(at(
            value.span,
            format!(
                "{entry} expects {} arguments but got {}",
                params.len(),
                args.len()
            ),
        ));
    }
    let param_name = |k: usize| {
        names
            .get(k)
            .map(|v| format!(" `{}`", var_name(*v)))
            .unwrap_or_default()
    };
    // core.md §6 (2): arguments are checked against the parameter types;
    // the variables those mention are bound by the first argument that
    // shows them, and every later one must agree.
    let mut sol = Solution::default();
    let mut bound_by: Vec<(Binder, usize)> = Vec::new();
    let mut arg_types: Vec<Option<Type>> = Vec::new();
    let mut values = Vec::with_capacity(args.len());
    for (k, (arg, param)) in args.into_iter().zip(&params).enumerate() {
        let (ty, span) = match &arg {
            EntryArg::Expr(e) => (Some(e.ty.clone()), e.span),
            EntryArg::Data(v) => (data_type(v), value.span),
        };
        let fits = match &ty {
            Some(ty) => signature.fits(param, ty, sol.clone()),
            None => Vec::new(),
        };
        let shown = ty.as_ref().map_or("a box".into(), show);
        arg_types.push(ty.clone());
        match fits.as_slice() {
            [fit] => {
                for b in &signature.binders {
                    if !solves(&sol, *b) && solves(fit, *b) {
                        bound_by.push((*b, k));
                    }
                }
                sol = fit.clone();
            }
            [] => {
                // Alone it would fit: an earlier argument gave one of its
                // variables another value.
                let alone = ty
                    .as_ref()
                    .map(|t| signature.fits(param, t, Solution::default()))
                    .unwrap_or_default();
                let disagreement = alone.first().and_then(|a| {
                    bound_by
                        .iter()
                        .find(|(b, _)| value_of(a, *b).is_some() && value_of(a, *b) != value_of(&sol, *b))
                        .map(|(b, j)| (*b, *j, value_of(a, *b)))
                });
                if let Some((b, j, here)) = disagreement {
                    return Err(at(
                        span,
                        format!(
                            "arguments {} and {} of {entry} disagree on {}: argument {}{} (of type {}) makes it {}, argument {}{} (of type {shown}) makes it {}",
                            j + 1,
                            k + 1,
                            show_binder(b, None, show),
                            j + 1,
                            param_name(j),
                            arg_types.get(j).map_or("a box".into(), |t: &Option<Type>| t
                                .as_ref()
                                .map_or("a box".into(), show)),
                            show_binder(b, value_of(&sol, b), show),
                            k + 1,
                            param_name(k),
                            show_binder(b, here, show),
                        ),
                    ));
                }
                return Err(at(
                    span,
                    format!(
                        "argument {} of {entry} has type {shown}, but the parameter{} has type {}",
                        k + 1,
                        param_name(k),
                        show(param)
                    ),
                ));
            }
            _ => {
                return Err(at(
                    span,
                    format!(
                        "argument {} of {entry} has type {shown}, which fits the parameter{}'s type {} in more than one way: write the parameter's axes out",
                        k + 1,
                        param_name(k),
                        show(param)
                    ),
                ));
            }
        }
        let v = match arg {
            EntryArg::Expr(e) => interp.eval(e, &env).map_err(Failure::Run)?,
            EntryArg::Data(v) => v,
        };
        values.push((v, span));
    }
    let Some(sol) = signature.unknowns().settle(sol, true) else {
        return Err(at(
            value.span,
            format!(
                "the arguments of {entry} do not fit its parameters' types together: {}",
                params.iter().map(show).collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    if let Some(b) = signature.binders.iter().find(|b| !solves(&sol, **b)) {
        return Err(at(
            value.span,
            format!(
                "{entry}'s {} is not given by the type of any argument: mention it in a parameter's type",
                show_binder(*b, None, show)
            ),
        ));
    }
    let f = instantiate(interp, &env, var, &signature, &sol, value.span)?;
    apply_entry(interp, &env, f, &sol.ty(signature.fun), values).map(Outcome::Entry)
}

/// The entry bound to `var` with its binders instantiated by `sol`.
fn instantiate<'p>(
    interp: &mut Interpreter,
    env: &Env<'p>,
    var: VarId,
    signature: &Signature<'_>,
    sol: &Solution,
    span: Span,
) -> Result<Value<'p>, Failure> {
    let mut f = Interpreter::lookup(env, var)
        .ok_or_else(|| Failure::Plain("internal error: no entry value".into()))?;
    for (k, b) in signature.binders.iter().enumerate() {
        // The type of the value once this binder is given.
        let mut rest = (*signature.fun).clone();
        for inner in signature.binders[k + 1..].iter().rev() {
            let body = std::sync::Arc::new(rest);
            rest = Type::scalar(match inner {
                Binder::Type(v) => Atom::Forall(*v, body),
                Binder::Index(v) => Atom::Pi(*v, body),
            });
        }
        let ty = sol.ty(&rest);
        let unknown = || Failure::Plain("internal error: an entry's variable has no value".into());
        f = match b {
            Binder::Type(v) => {
                let atom = sol.types.get(v).ok_or_else(unknown)?;
                interp.type_apply(&f, atom, &ty, env, span)
            }
            Binder::Index(IVar::Dim(v)) => {
                let n = sol.dims.get(v).and_then(|d| d.as_const()).ok_or_else(unknown)?;
                interp.index_apply(&f, &IndexVal::Dim(n), &ty, env, span)
            }
            Binder::Index(IVar::Shape(v)) => {
                let dims = sol
                    .shapes
                    .get(v)
                    .and_then(|s| {
                        s.dims()?
                            .iter()
                            .map(|d| d.as_const())
                            .collect::<Option<Vec<i64>>>()
                    })
                    .ok_or_else(unknown)?;
                interp.index_apply(&f, &IndexVal::Shape(dims), &ty, env, span)
            }
        }
        .map_err(Failure::Run)?;
    }
    Ok(f)
}

/// An entry's function value `f`, of type `ty`, applied to argument values
/// already checked against its parameters, each with the position to blame.
pub fn apply_entry<'p>(
    interp: &mut Interpreter,
    env: &Env<'p>,
    mut f: Value<'p>,
    ty: &Type,
    args: Vec<(Value<'p>, Span)>,
) -> Result<Value<'p>, Failure> {
    let mut ty = ty.clone();
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
    let signature = Signature::of(&value.ty);
    let params = parameters(signature.fun);
    let mut sol = Solution::default();
    for (param, a) in params.iter().zip(&args) {
        if let Some(ty) = data_type(a)
            && let Some(fit) = signature.fits(param, &ty, sol.clone()).into_iter().next()
        {
            sol = fit;
        }
    }
    let sol = signature.unknowns().settle(sol.clone(), true).unwrap_or(sol);
    let f = instantiate(interp, &env, var, &signature, &sol, value.span)?;
    let args = args.into_iter().map(|a| (a, value.span)).collect();
    apply_entry(interp, &env, f, &sol.ty(signature.fun), args)
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
                // The binders of an entry's free variables.
                TAtomKind::TLambda { body, .. } | TAtomKind::ILambda { body, .. } if out.is_empty() => {
                    e = body
                }
                _ => break,
            },
            _ => break,
        }
    }
    out
}
