//! Files: `read-file-f32bin` (the floats read by the runtime, a file it
//! cannot read failing there, so that the interpreter runs the program
//! again and gives its message).

use super::*;

impl<'m> Alloc<'m> {
    pub(super) fn files(
        &mut self,
        name: &'static str,
        indices: &[Index],
        args: &[Val<'m>],
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        Some(match (name, args, indices) {
            ("read-file-f32bin", [Val::Array(path)], [_, shape]) if path.dims.len() == 1 => {
                self.read_f32bin(path, shape, body)
            }
            _ => return None,
        })
    }

    /// As many little-endian `f32` as `shape` holds, from the start of
    /// the file named by the code points `path`, laid out in `shape`.
    fn read_f32bin(&mut self, path: &View, shape: &Index, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let dims = self.index(shape)?.dims().to_vec();
        self.non_negative(&dims, body);
        let path_args = vec![
            Expr::Addr {
                buf: path.buf,
                index: std::boxed::Box::new(path.offset.clone()),
            },
            path.strides[0].clone(),
            path.dims[0].clone(),
            product(&dims),
        ];
        // The file checked before its floats are given room.
        body.push(Stmt::Call {
            func: "rt_check_f32bin",
            args: path_args.clone(),
        });
        let dest = self.alloc("floats", Elem::Float, dims.clone(), body);
        let mut args = path_args;
        args.push(Expr::Addr {
            buf: dest.buf,
            index: std::boxed::Box::new(dest.offset.clone()),
        });
        body.push(Stmt::Call {
            func: "rt_read_f32bin",
            args,
        });
        Ok(cell_val(dest))
    }
}
