//! The compiler: the checker's typed tree lowered, one level at a time,
//! towards fused loops (issue 14; ARCHITECTURE.md "Engines").
//!
//! Each level is a Rust type with a printer and a verifier, and each pass a
//! function from one level to the next:
//!
//! 1. [`maps`] — *explicit maps*: every implicit lift of the typed tree is
//!    a `map` over a frame, binding the cells of the arrays it iterates; an
//!    argument with a shorter frame is bound by an outer map and *captured*
//!    by the inner ones (never replicated); `let` is a map over the empty
//!    frame; every application is of one function cell to argument cells
//!    of exactly its parameters' shapes. [`lower`] makes it from the typed
//!    tree.
//!
//! 2. [`mono`] — *monomorphic* (begun): every polymorphic definition
//!    replaced by one instance per instantiation the program uses.
//!
//! 3. [`fuse`] — the first rule of the combinator level: a chain of maps
//!    over one frame fused into one map (vertical fusion).
//!
//! [`raise`] turns explicit maps back into the typed tree, so that the
//! interpreter can run a lowered program: the suite checks that it prints
//! what the original prints.
//!
//! The levels below (monomorphic first-order code with sizes computed
//! first, combinators with fusion, parallel loops with memory, C) come
//! next.

pub mod allocate;
pub mod c;
mod columns;
pub mod fuse;
pub mod loops;
pub mod lower;
pub mod maps;
pub mod mono;
pub mod raise;

pub use lower::{Unsupported, lower_program};
pub use raise::raise_program;

use remora_check::NameTable;
use remora_check::typed::TDecl;

/// The levels `remora compile --dump` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// [`maps`]: every lift a map.
    Maps,
    /// [`mono`]: explicit maps with every polymorphic definition replaced
    /// by its instances.
    Mono,
    /// [`fuse`]: and chains of maps over one frame fused into one.
    Fused,
    /// [`loops`]: loops over buffers ([`allocate`]).
    Loops,
    /// The C program ([`c`]).
    C,
}

/// The program lowered to `level`, verified, and printed; or what stopped
/// it (a construct not handled yet, or a level that breaks its rules: a
/// compiler bug, said so).
pub fn dump(decls: &[TDecl], names: &NameTable, level: Level, entry: &str) -> Result<String, Unsupported> {
    if matches!(level, Level::Loops | Level::C) {
        let program = loops(decls, names, entry)?;
        return Ok(match level {
            Level::Loops => program.print(),
            _ => c::emit(&program),
        });
    }
    let program = lowered(decls, level, names)?;
    let printer = maps::Printer {
        names,
        vars: &program.var_names,
    };
    Ok(printer.program(&program))
}

/// The program's entry `entry` (or its bare expressions, with no entry)
/// at the loop level, verified.
pub fn loops(decls: &[TDecl], names: &NameTable, entry: &str) -> Result<loops::Program, Unsupported> {
    within_budget(decls)?;
    let program = lowered(decls, Level::Fused, names)?;
    allocate::allocate(&program, entry)
}

/// The program lowered to `level` and verified there.
pub fn lowered(decls: &[TDecl], level: Level, names: &NameTable) -> Result<maps::Program, Unsupported> {
    let broken = |level: &'static str| {
        move |rules: String| Unsupported {
            span: remora_syntax::Span::default(),
            what: format!("internal error: the {level} level breaks its rules: {rules}"),
        }
    };
    let program = lower_program(decls, names)?;
    maps::verify(&program).map_err(broken("explicit-maps"))?;
    if level == Level::Maps {
        return Ok(program);
    }
    let program = mono::monomorphise(&program)?;
    mono::verify_monomorphic(&program).map_err(broken("monomorphic"))?;
    if level == Level::Mono {
        return Ok(program);
    }
    // (The loop level and C are made from the fused level: see `loops`.)
    let program = fuse::fuse_program(&program);
    mono::verify_monomorphic(&program).map_err(broken("fused"))?;
    Ok(program)
}

/// The most expressions (and literal atoms) a program may have for the
/// compiled engine, the deepest they may nest, and the most bytes of C it
/// may make: past these the passes and the C compiler take longer than the
/// interpreter would (and the passes recurse as deep as the program
/// nests), so such a program runs on the interpreter.
pub const MAX_NODES: usize = 100_000;
pub const MAX_DEPTH: usize = 256;
pub const MAX_C_BYTES: usize = 1 << 20;

/// Whether the checked program is small enough for the compiled engine
/// (see [`MAX_NODES`]): counted before lowering, in time linear in its
/// size and constant stack.
pub fn within_budget(decls: &[TDecl]) -> Result<(), Unsupported> {
    let too_large = |what: String| Unsupported {
        span: remora_syntax::Span::default(),
        what: format!("too large for the compiled engine: {what}"),
    };
    let mut nodes = 0usize;
    let mut stack: Vec<(&remora_check::typed::TExpr, usize)> = Vec::new();
    for d in decls {
        match d {
            TDecl::Def { value, .. } => stack.push((value, 1)),
            TDecl::Expr(e) => stack.push((e, 1)),
        }
    }
    let mut children = Vec::new();
    while let Some((e, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(too_large(format!(
                "expressions nested more than {MAX_DEPTH} deep"
            )));
        }
        nodes += 1;
        if let remora_check::typed::TExprKind::Array { atoms, .. } = &e.kind {
            nodes += atoms.len();
        }
        if nodes > MAX_NODES {
            return Err(too_large(format!(
                "more than {MAX_NODES} expressions and literal atoms"
            )));
        }
        children.clear();
        e.push_children(&mut children);
        stack.extend(children.iter().map(|c| (*c, depth + 1)));
    }
    Ok(())
}
