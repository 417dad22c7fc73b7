//! Reads an Itanium C++ ABI mangled name (§5.1, "External Names") into the
//! node arena of `ast.rs`, following the grammar as binutils' demangler
//! (`libiberty/cp-demangle.c`, the one `c++filt` 2.40 uses) reads it: the
//! same substitution candidates, the same GNU extensions (clone suffixes,
//! ABI tags, `DF16_`), and the same refusals.
//!
//! Every read is bounds-checked; nesting deeper than `MAX_DEPTH` and more
//! substitutions than the name has bytes make the name undemangleable.

use super::ast::{self, Id, LitStyle, Node, Qual};

/// Nesting of the recursive grammar beyond which a name is refused, so that
/// no input can exhaust the stack.
const MAX_DEPTH: u32 = 256;

/// The state of one parse: the input, the arena, the substitution table and
/// binutils' context flags.
pub(super) struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    pub(super) nodes: Vec<Node<'a>>,
    subs: Vec<Id>,
    /// The last source name read, which a constructor or destructor takes.
    last_name: Option<Id>,
    is_expression: bool,
    is_conversion: bool,
    depth: u32,
    /// binutils' `DMGL_VERBOSE`: the standard abbreviations `Ss`, `Si`,
    /// `So`, `Sd` spelled out in full (`c++filt`'s default) rather than as
    /// `std::string` and the like (gprof's, `nm -C`'s and `c++filt -i`'s).
    verbose: bool,
    /// The first constructor or destructor name read: `C1`, `D2`...
    pub(super) structor: Option<[u8; 2]>,
    /// binutils' `unresolved_name_state`: 1 before any `sr`, -1 once an
    /// `sr` was read in the current syntax (so a failed parse is retried
    /// with the old one), 0 on that retry.
    pub(super) unresolved_state: i8,
}

/// `None`: the name does not follow the grammar (or is too deep).
type P<T> = Option<T>;

/// A saved parse position, for the one place the grammar needs a retry.
struct Checkpoint {
    pos: usize,
    nodes: usize,
    subs: usize,
}

impl<'a> Parser<'a> {
    pub(super) fn new(s: &'a [u8], verbose: bool) -> Self {
        Parser {
            verbose,
            structor: None,
            s,
            pos: 0,
            nodes: Vec::new(),
            subs: Vec::new(),
            last_name: None,
            is_expression: false,
            is_conversion: false,
            depth: 0,
            unresolved_state: 1,
        }
    }

    /// The whole name: `_Z <encoding> [clone suffixes]`, all input used.
    pub(super) fn parse(&mut self) -> P<Id> {
        let top = self.mangled_name(true)?;
        (self.pos == self.s.len()).then_some(top)
    }

    fn peek(&self) -> u8 {
        self.s.get(self.pos).copied().unwrap_or(0)
    }

    fn peek_next(&self) -> u8 {
        self.s.get(self.pos + 1).copied().unwrap_or(0)
    }

    fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.s.len());
    }

    fn next_char(&mut self) -> u8 {
        let c = self.peek();
        self.advance(1);
        c
    }

    fn check(&mut self, c: u8) -> bool {
        let hit = self.peek() == c && c != 0;
        if hit {
            self.advance(1);
        }
        hit
    }

    fn expect(&mut self, c: u8) -> P<()> {
        self.check(c).then_some(())
    }

    fn add(&mut self, node: Node<'a>) -> Id {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// binutils allows as many substitutions as the name has bytes.
    fn add_sub(&mut self, id: Id) -> P<()> {
        if self.subs.len() >= self.s.len() {
            return None;
        }
        self.subs.push(id);
        Some(())
    }

    fn node(&self, id: Id) -> Option<&Node<'a>> {
        self.nodes.get(id)
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            pos: self.pos,
            nodes: self.nodes.len(),
            subs: self.subs.len(),
        }
    }

    fn backtrack(&mut self, c: &Checkpoint) {
        self.pos = c.pos;
        self.nodes.truncate(c.nodes);
        self.subs.truncate(c.subs);
    }

    /// Runs `f` one level deeper, refusing names nested beyond `MAX_DEPTH`.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> P<T>) -> P<T> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    // <mangled-name> ::= _Z <encoding> [<clone-suffix>]*
    fn mangled_name(&mut self, top_level: bool) -> P<Id> {
        // Inside a literal, binutils also takes `Z` without the `_`.
        if !self.check(b'_') && top_level {
            return None;
        }
        self.expect(b'Z')?;
        let mut p = self.nested(|d| d.encoding(top_level))?;
        if top_level {
            while self.peek() == b'.' && is_clone_start(self.peek_next()) {
                p = self.clone_suffix(p);
            }
        }
        Some(p)
    }

    // <clone-suffix> ::= [. <clone-type-identifier>] [. <nonnegative number>]*
    fn clone_suffix(&mut self, encoding: Id) -> Id {
        let start = self.pos;
        let mut end = start;
        let at = |i: usize| self.s.get(i).copied().unwrap_or(0);
        let word = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_';
        if at(end) == b'.' && word(at(end + 1)) {
            end += 2;
            while word(at(end)) {
                end += 1;
            }
        }
        while at(end) == b'.' && at(end + 1).is_ascii_digit() {
            end += 2;
            while at(end).is_ascii_digit() {
                end += 1;
            }
        }
        let text = self.s.get(start..end).unwrap_or_default();
        self.pos = end.min(self.s.len());
        let n = self.add(Node::Name(text));
        self.add(Node::Clone(encoding, n))
    }

    // <encoding> ::= <name> <bare-function-type> | <name> | <special-name>
    fn encoding(&mut self, top_level: bool) -> P<Id> {
        if matches!(self.peek(), b'G' | b'T') {
            return self.special_name();
        }
        let name = self.name()?;
        let peek = self.peek();
        if peek == 0 || peek == b'E' {
            return Some(name);
        }
        let ftype = self.bare_function_type(self.has_return_type(Some(name)))?;
        // A local name's own return type would read as the enclosing one's.
        if !top_level && matches!(self.node(name), Some(Node::Local(..))) {
            self.clear_return_type(ftype);
        }
        Some(self.add(Node::Typed(name, ftype)))
    }

    fn clear_return_type(&mut self, ftype: Id) {
        if let Some(Node::Function(ret, _)) = self.nodes.get_mut(ftype) {
            *ret = None;
        }
    }

    /// Template functions have return types, except constructors,
    /// destructors and conversion operators; other functions do not.
    fn has_return_type(&self, id: Option<Id>) -> bool {
        match id.and_then(|i| self.node(i)) {
            Some(Node::Local(_, right)) => self.has_return_type(Some(*right)),
            Some(Node::Template(name, _)) => !self.is_ctor_dtor_or_conversion(*name),
            Some(Node::Qualifier(q, inner, _)) if q.is_fnqual() => self.has_return_type(*inner),
            _ => false,
        }
    }

    fn is_ctor_dtor_or_conversion(&self, id: Id) -> bool {
        match self.node(id) {
            Some(Node::Qual(_, right) | Node::Local(_, right)) => {
                self.is_ctor_dtor_or_conversion(*right)
            }
            Some(Node::Ctor(_) | Node::Dtor(_) | Node::Conversion(_)) => true,
            _ => false,
        }
    }

    // <special-name> (Itanium ABI §5.1.4), with the GNU extensions binutils reads.
    fn special_name(&mut self) -> P<Id> {
        if self.check(b'T') {
            return self.special_t();
        }
        self.expect(b'G')?;
        match self.next_char() {
            b'V' => self.special(Parser::name, "guard variable for "),
            b'R' => {
                let name = self.name()?;
                let n = self.number();
                let num = self.add(Node::Number(n));
                Some(self.add(Node::RefTemp(name, num)))
            }
            b'A' => self.special(Parser::encoding_nested, "hidden alias for "),
            b'I' => {
                let module = self.module_name(None)?;
                Some(self.add(Node::Special("initializer for module ", module?)))
            }
            b'T' => {
                if self.next_char() == b'n' {
                    self.special(Parser::encoding_nested, "non-transaction clone for ")
                } else {
                    self.special(Parser::encoding_nested, "transaction clone for ")
                }
            }
            _ => None,
        }
    }

    fn special_t(&mut self) -> P<Id> {
        match self.next_char() {
            b'V' => self.special(Parser::type_, "vtable for "),
            b'T' => self.special(Parser::type_, "VTT for "),
            b'I' => self.special(Parser::type_, "typeinfo for "),
            b'S' => self.special(Parser::type_, "typeinfo name for "),
            b'F' => self.special(Parser::type_, "typeinfo fn for "),
            b'J' => self.special(Parser::type_, "java Class for "),
            b'H' => self.special(Parser::name, "TLS init function for "),
            b'W' => self.special(Parser::name, "TLS wrapper function for "),
            b'A' => self.special(Parser::template_arg, "template parameter object for "),
            b'h' => {
                self.call_offset(b'h')?;
                self.special(Parser::encoding_nested, "non-virtual thunk to ")
            }
            b'v' => {
                self.call_offset(b'v')?;
                self.special(Parser::encoding_nested, "virtual thunk to ")
            }
            b'c' => {
                self.call_offset(0)?;
                self.call_offset(0)?;
                self.special(Parser::encoding_nested, "covariant return thunk to ")
            }
            b'C' => {
                let derived = self.type_()?;
                if self.number() < 0 {
                    return None;
                }
                self.expect(b'_')?;
                let base = self.type_()?;
                Some(self.add(Node::ConstructionVtable(base, derived)))
            }
            _ => None,
        }
    }

    fn special(&mut self, f: fn(&mut Self) -> P<Id>, text: &'static str) -> P<Id> {
        let inner = self.nested(f)?;
        Some(self.add(Node::Special(text, inner)))
    }

    fn encoding_nested(&mut self) -> P<Id> {
        self.encoding(false)
    }

    // <call-offset> ::= h <nv-offset> _ | v <v-offset> _
    fn call_offset(&mut self, first: u8) -> P<()> {
        let c = if first == 0 { self.next_char() } else { first };
        match c {
            b'h' => {
                self.number();
            }
            b'v' => {
                self.number();
                self.expect(b'_')?;
                self.number();
            }
            _ => return None,
        }
        self.expect(b'_')
    }

    // <name> ::= <nested-name> | <unscoped-name> | <unscoped-template-name>
    //            <template-args> | <local-name>
    fn name(&mut self) -> P<Id> {
        self.nested(Parser::name_inner)
    }

    fn name_inner(&mut self) -> P<Id> {
        match self.peek() {
            b'N' => return self.nested_name(),
            b'Z' => return self.local_name(),
            b'U' => return self.unqualified_name(None),
            _ => {}
        }
        let (dc, from_sub) = self.unscoped_name()?;
        if self.peek() != b'I' {
            return Some(dc);
        }
        // An unscoped template name is a substitution candidate.
        if !from_sub {
            self.add_sub(dc)?;
        }
        let args = self.template_args()?;
        Some(self.add(Node::Template(dc, args)))
    }

    /// `[St] [<module substitution>] <unqualified-name>`, or a substitution
    /// (then not a new candidate: the flag).
    fn unscoped_name(&mut self) -> P<(Id, bool)> {
        let mut scope = None;
        if self.peek() == b'S' && self.peek_next() == b't' {
            self.advance(2);
            scope = Some(self.add(Node::Name(b"std")));
        }
        let mut module = None;
        if self.peek() == b'S' {
            let sub = self.substitution()?;
            if !matches!(self.node(sub), Some(Node::Module(..))) {
                if scope.is_some() {
                    return None;
                }
                return Some((sub, true));
            }
            module = Some(sub);
        }
        Some((self.unqualified_name_in(scope, module)?, false))
    }

    // <nested-name> ::= N [<CV-qualifiers>] [<ref-qualifier>] <prefix> E
    fn nested_name(&mut self) -> P<Id> {
        self.expect(b'N')?;
        let quals = self.cv_qualifiers(true)?;
        let rqual = self.ref_qualifier();
        let prefix = self.prefix(true)?;
        let mut ret = self.wrap_quals(&quals, prefix);
        if let Some(q) = rqual {
            ret = self.add(Node::Qualifier(q, Some(ret), None));
        }
        self.expect(b'E')?;
        Some(ret)
    }

    /// `quals` around `inner`, the first one outermost.
    fn wrap_quals(&mut self, quals: &[(Qual, Option<Id>)], inner: Id) -> Id {
        quals.iter().rev().fold(inner, |acc, &(q, extra)| {
            self.add(Node::Qualifier(q, Some(acc), extra))
        })
    }

    // <prefix>: unqualified names, template args, a template param or a
    // decltype, each step (but the last) a substitution candidate when
    // `subst`.
    fn prefix(&mut self, subst: bool) -> P<Id> {
        let mut ret: Option<Id> = None;
        loop {
            let peek = self.peek();
            if peek == b'D' && matches!(self.peek_next(), b'T' | b't') {
                if ret.is_some() {
                    return None;
                }
                ret = Some(self.type_()?);
            } else if peek == b'I' {
                let name = ret?;
                let args = self.template_args()?;
                ret = Some(self.add(Node::Template(name, args)));
            } else if peek == b'T' {
                if ret.is_some() {
                    return None;
                }
                ret = Some(self.template_param()?);
            } else if peek == b'M' {
                // A lambda's initializer scope; nothing to print.
                self.advance(1);
                continue;
            } else if peek == b'S' {
                let sub = self.substitution_in(true)?;
                if matches!(self.node(sub), Some(Node::Module(..))) {
                    ret = Some(self.unqualified_name_in(ret, Some(sub))?);
                } else {
                    if ret.is_some() {
                        return None;
                    }
                    ret = Some(sub);
                    continue;
                }
            } else {
                ret = Some(self.unqualified_name(ret)?);
            }
            if self.peek() == b'E' {
                return ret;
            }
            if subst {
                self.add_sub(ret?)?;
            }
        }
    }

    // <unqualified-name> ::= <operator-name> [<abi-tags>] | <ctor-dtor-name>
    //   | <source-name> | <unnamed-type-name> | DC <source-name>+ E
    fn unqualified_name(&mut self, scope: Option<Id>) -> P<Id> {
        self.unqualified_name_in(scope, None)
    }

    /// An unqualified name in `scope`, attached to `module` (`name@mod`).
    fn unqualified_name_in(&mut self, scope: Option<Id>, module: Option<Id>) -> P<Id> {
        let module = self.module_name(module)?;
        let peek = self.peek();
        let mut ret = if peek.is_ascii_digit() {
            self.source_name()?
        } else if peek.is_ascii_lowercase() {
            self.operator_unqualified()?
        } else if peek == b'D' && self.peek_next() == b'C' {
            self.structured_binding()?
        } else if peek == b'C' || peek == b'D' {
            self.ctor_dtor_name()?
        } else if peek == b'L' {
            self.advance(1);
            let n = self.source_name()?;
            self.discriminator()?;
            n
        } else if peek == b'U' {
            match self.peek_next() {
                b'l' => self.lambda()?,
                b't' => self.unnamed_type()?,
                _ => return None,
            }
        } else {
            return None;
        };
        if let Some(m) = module {
            ret = self.add(Node::ModuleEntity(ret, m));
        }
        if self.peek() == b'B' {
            ret = self.abi_tags(ret)?;
        }
        Some(match scope {
            Some(s) => self.add(Node::Qual(s, ret)),
            None => ret,
        })
    }

    // <module-name> ::= W [P] <source-name> ..., each a substitution
    // candidate, after `module` if one came through a substitution.
    fn module_name(&mut self, mut module: Option<Id>) -> P<Option<Id>> {
        while self.check(b'W') {
            let partition = self.check(b'P');
            let name = self.source_name()?;
            let m = self.add(Node::Module(module, name, partition));
            self.add_sub(m)?;
            module = Some(m);
        }
        Some(module)
    }

    fn operator_unqualified(&mut self) -> P<Id> {
        let was = self.is_expression;
        if self.peek() == b'o' && self.peek_next() == b'n' {
            self.advance(2);
            // `on cv` names a conversion operator even in an expression.
            self.is_expression = false;
        }
        let ret = self.operator_name();
        self.is_expression = was;
        let ret = ret?;
        if matches!(self.node(ret), Some(Node::Operator(o)) if o.code == "li") {
            let name = self.source_name()?;
            return Some(self.add(Node::Unary(ret, name, false)));
        }
        Some(ret)
    }

    fn structured_binding(&mut self) -> P<Id> {
        self.advance(2);
        let mut names = Vec::new();
        loop {
            names.push(self.source_name()?);
            if self.peek() == b'E' {
                break;
            }
        }
        self.advance(1);
        let list = self.add(Node::ArgList(names));
        Some(self.add(Node::StructuredBinding(list)))
    }

    fn abi_tags(&mut self, mut dc: Id) -> P<Id> {
        // An ABI tag is no name a constructor could take.
        let hold = self.last_name;
        while self.check(b'B') {
            let tag = self.source_name()?;
            dc = self.add(Node::Tagged(dc, tag));
        }
        self.last_name = hold;
        Some(dc)
    }

    // <source-name> ::= <positive length number> <identifier>
    fn source_name(&mut self) -> P<Id> {
        let len = usize::try_from(self.number()).ok().filter(|&l| l > 0)?;
        let text = self.s.get(self.pos..self.pos.checked_add(len)?)?;
        self.advance(len);
        let ret = self.add(Node::Name(anonymous_namespace(text)));
        self.last_name = Some(ret);
        Some(ret)
    }

    /// `[n] digits`, as an `i32`; -1 on overflow, 0 without digits.
    fn number(&mut self) -> i32 {
        let negative = self.check(b'n');
        let mut ret: i32 = 0;
        while self.peek().is_ascii_digit() {
            let d = i32::from(self.peek() - b'0');
            if ret > (i32::MAX - d) / 10 {
                return -1;
            }
            ret = ret * 10 + d;
            self.advance(1);
        }
        if negative {
            -ret
        } else {
            ret
        }
    }

    // <operator-name>, `cv <type>` and `v <digit> <source-name>`.
    fn operator_name(&mut self) -> P<Id> {
        let c1 = self.next_char();
        let c2 = self.next_char();
        if c1 == b'v' && c2.is_ascii_digit() {
            let name = self.source_name()?;
            return Some(self.add(Node::ExtOperator(c2 - b'0', name)));
        }
        if c1 == b'c' && c2 == b'v' {
            let was = self.is_conversion;
            self.is_conversion = !self.is_expression;
            let ty = self.type_();
            let conversion = self.is_conversion;
            self.is_conversion = was;
            let ty = ty?;
            return Some(self.add(if conversion {
                Node::Conversion(ty)
            } else {
                Node::Cast(ty)
            }));
        }
        let info = ast::operator(c1, c2)?;
        Some(self.add(Node::Operator(info)))
    }

    // <ctor-dtor-name> ::= C[I]1..5 [<type>] | D0..D5, named after the
    // last source name.
    fn ctor_dtor_name(&mut self) -> P<Id> {
        if self.peek() == b'C' {
            let inheriting = self.peek_next() == b'I';
            if inheriting {
                self.advance(1);
            }
            if !matches!(self.peek_next(), b'1'..=b'5') {
                return None;
            }
            self.structor.get_or_insert([b'C', self.peek_next()]);
            self.advance(2);
            if inheriting {
                // The base class of an inheriting constructor is not printed.
                let _ = self.type_();
            }
            let name = self.last_name?;
            return Some(self.add(Node::Ctor(name)));
        }
        if !matches!(self.peek_next(), b'0' | b'1' | b'2' | b'4' | b'5') {
            return None;
        }
        self.structor.get_or_insert([b'D', self.peek_next()]);
        self.advance(2);
        let name = self.last_name?;
        Some(self.add(Node::Dtor(name)))
    }

    fn next_is_type_qual(&self) -> bool {
        match self.peek() {
            b'r' | b'V' | b'K' => true,
            b'D' => matches!(self.peek_next(), b'x' | b'o' | b'O' | b'w'),
            _ => false,
        }
    }

    // <type> (Itanium ABI §5.1.5).
    fn type_(&mut self) -> P<Id> {
        self.nested(Parser::type_inner)
    }

    fn type_inner(&mut self) -> P<Id> {
        if self.next_is_type_qual() {
            return self.qualified_type();
        }
        let peek = self.peek();
        let (ret, can_subst) = match peek {
            b'a'..=b'j' | b'l'..=b'o' | b's' | b't' | b'v'..=b'z' => {
                self.advance(1);
                (self.add(Node::Builtin(ast::builtin_letter(peek)?)), false)
            }
            b'u' => {
                self.advance(1);
                let name = self.source_name()?;
                (self.add(Node::VendorType(name)), true)
            }
            b'F' => (self.function_type()?, true),
            b'0'..=b'9' | b'N' | b'Z' => (self.name()?, true),
            b'A' => (self.array_type()?, true),
            b'M' => (self.pointer_to_member_type()?, true),
            b'T' => (self.template_param_type()?, true),
            b'S' => self.substitution_type()?,
            b'O' | b'P' | b'R' | b'C' | b'G' => (self.type_modifier(peek)?, true),
            b'U' => (self.vendor_qualified_type()?, true),
            b'D' => self.d_type()?,
            // binutils reads anything else as a class name (an operator
            // name, a local source name), as it reads `<name>`.
            _ => (self.name()?, true),
        };
        if can_subst {
            self.add_sub(ret)?;
        }
        Some(ret)
    }

    /// `<CV-qualifiers> <type>`: only the fully qualified type is a
    /// substitution candidate; cv before a function type apply to `this`.
    fn qualified_type(&mut self) -> P<Id> {
        let quals = self.cv_qualifiers(false)?;
        let inner = if self.peek() == b'F' {
            self.function_type()?
        } else {
            self.type_()?
        };
        // The ref-qualifier goes outside the cv-qualifiers, to print after.
        let ret = match self.node(inner).cloned() {
            Some(Node::Qualifier(q @ (Qual::RefThis | Qual::RvalueRefThis), Some(f), e)) => {
                let cv = self.wrap_quals(&quals, f);
                self.add(Node::Qualifier(q, Some(cv), e))
            }
            _ => self.wrap_quals(&quals, inner),
        };
        self.add_sub(ret)?;
        Some(ret)
    }

    fn type_modifier(&mut self, c: u8) -> P<Id> {
        self.advance(1);
        let inner = self.type_()?;
        Some(self.add(match c {
            b'O' => Node::RvalueRef(inner),
            b'P' => Node::Pointer(inner),
            b'R' => Node::Reference(inner),
            b'C' => Node::Complex(inner),
            _ => Node::Imaginary(inner),
        }))
    }

    fn vendor_qualified_type(&mut self) -> P<Id> {
        self.advance(1);
        let mut name = self.source_name()?;
        if self.peek() == b'I' {
            let args = self.template_args()?;
            name = self.add(Node::Template(name, args));
        }
        let ty = self.type_()?;
        Some(self.add(Node::VendorTypeQual(ty, name)))
    }

    /// `T_` as a type, possibly a template template parameter with args.
    fn template_param_type(&mut self) -> P<Id> {
        let param = self.template_param()?;
        if self.peek() != b'I' {
            return Some(param);
        }
        if !self.is_conversion {
            self.add_sub(param)?;
            let args = self.template_args()?;
            return Some(self.add(Node::Template(param, args)));
        }
        // In a conversion operator's type the args may be the operator's.
        let cp = self.checkpoint();
        let args = self.template_args();
        match args {
            Some(args) if self.peek() == b'I' => {
                self.add_sub(param)?;
                Some(self.add(Node::Template(param, args)))
            }
            _ => {
                self.backtrack(&cp);
                Some(param)
            }
        }
    }

    /// A type starting with `S`: a substitution, or a class name in `std`.
    fn substitution_type(&mut self) -> P<(Id, bool)> {
        let next = self.peek_next();
        if next.is_ascii_digit() || next == b'_' || next.is_ascii_uppercase() {
            let sub = self.substitution()?;
            // A module name is no type.
            if matches!(self.node(sub), Some(Node::Module(..))) {
                return None;
            }
            if self.peek() == b'I' {
                let args = self.template_args()?;
                return Some((self.add(Node::Template(sub, args)), true));
            }
            return Some((sub, false));
        }
        let ret = self.name()?;
        let is_std = matches!(self.node(ret), Some(Node::SubStd(_)));
        Some((ret, !is_std))
    }

    /// Types written `D<letter>`.
    fn d_type(&mut self) -> P<(Id, bool)> {
        self.advance(1);
        let c = self.next_char();
        let node = match c {
            b'T' | b't' => {
                let e = self.expression()?;
                self.expect(b'E')?;
                return Some((self.add(Node::Decltype(e)), true));
            }
            b'p' => {
                let t = self.type_()?;
                return Some((self.add(Node::PackExpansion(t)), true));
            }
            b'v' => return Some((self.vector_type()?, true)),
            b'a' => Node::Name(b"auto"),
            b'c' => Node::Name(b"decltype(auto)"),
            b'F' => self.float_n()?,
            _ => Node::Builtin(ast::builtin_d(c)?),
        };
        Some((self.add(node), false))
    }

    // DF <number> _ | DF <number> x | DF16b
    fn float_n(&mut self) -> P<Node<'a>> {
        let bits = self.number();
        match self.peek() {
            b'b' if bits == 16 => {
                self.advance(1);
                Some(Node::Builtin(&ast::BFLOAT16))
            }
            b'x' | b'_' => {
                let x = self.next_char() == b'x';
                Some(Node::FloatN(bits, x))
            }
            _ => None,
        }
    }

    /// `[r] [V] [K] [Dx] [Do | DO <expr> E] [Dw <types> E]`, in order read.
    fn cv_qualifiers(&mut self, member_fn: bool) -> P<Vec<(Qual, Option<Id>)>> {
        let mut quals = Vec::new();
        while self.next_is_type_qual() {
            let c = self.next_char();
            let (q, extra) = match c {
                b'r' => (Qual::Restrict, None),
                b'V' => (Qual::Volatile, None),
                b'K' => (Qual::Const, None),
                _ => self.d_qualifier()?,
            };
            quals.push((if member_fn { q.on_this() } else { q }, extra));
        }
        if !member_fn && self.peek() == b'F' {
            for q in &mut quals {
                q.0 = q.0.on_this();
            }
        }
        Some(quals)
    }

    fn d_qualifier(&mut self) -> P<(Qual, Option<Id>)> {
        match self.next_char() {
            b'x' => Some((Qual::TransactionSafe, None)),
            b'o' => Some((Qual::Noexcept, None)),
            b'O' => {
                let e = self.expression()?;
                self.expect(b'E')?;
                Some((Qual::Noexcept, Some(e)))
            }
            b'w' => {
                let list = self.parmlist()?;
                self.expect(b'E')?;
                Some((Qual::ThrowSpec, Some(list)))
            }
            _ => None,
        }
    }

    fn ref_qualifier(&mut self) -> Option<Qual> {
        let q = match self.peek() {
            b'R' => Qual::RefThis,
            b'O' => Qual::RvalueRefThis,
            _ => return None,
        };
        self.advance(1);
        Some(q)
    }

    // <function-type> ::= F [Y] <bare-function-type> [<ref-qualifier>] E
    fn function_type(&mut self) -> P<Id> {
        self.expect(b'F')?;
        self.check(b'Y');
        let mut ret = self.bare_function_type(true)?;
        if let Some(q) = self.ref_qualifier() {
            ret = self.add(Node::Qualifier(q, Some(ret), None));
        }
        self.expect(b'E')?;
        Some(ret)
    }

    // <type>+, a lone `void` dropped.
    fn parmlist(&mut self) -> P<Id> {
        let mut types = Vec::new();
        loop {
            let peek = self.peek();
            if peek == 0 || peek == b'E' || peek == b'.' {
                break;
            }
            if matches!(peek, b'R' | b'O') && self.peek_next() == b'E' {
                // The function's ref-qualifier, not a parameter.
                break;
            }
            types.push(self.type_()?);
        }
        if types.is_empty() {
            return None;
        }
        if let [only] = types[..] {
            if matches!(self.node(only), Some(Node::Builtin(t)) if t.style == LitStyle::Void) {
                types.clear();
            }
        }
        Some(self.add(Node::ArgList(types)))
    }

    // <bare-function-type> ::= [J] <type>+
    fn bare_function_type(&mut self, mut has_return_type: bool) -> P<Id> {
        if self.check(b'J') {
            has_return_type = true;
        }
        let ret = if has_return_type {
            Some(self.type_()?)
        } else {
            None
        };
        let params = self.parmlist()?;
        Some(self.add(Node::Function(ret, Some(params))))
    }

    // <array-type> ::= A [<dimension number> | <expression>] _ <type>
    fn array_type(&mut self) -> P<Id> {
        self.expect(b'A')?;
        let dim = if self.peek() == b'_' {
            None
        } else if self.peek().is_ascii_digit() {
            let start = self.pos;
            while self.peek().is_ascii_digit() {
                self.advance(1);
            }
            let digits = self.s.get(start..self.pos).unwrap_or_default();
            Some(self.add(Node::Name(digits)))
        } else {
            Some(self.expression()?)
        };
        self.expect(b'_')?;
        let elem = self.type_()?;
        Some(self.add(Node::Array(dim, elem)))
    }

    // <vector-type> ::= Dv <number> _ <type> | Dv _ <expression> _ <type>
    fn vector_type(&mut self) -> P<Id> {
        let dim = if self.check(b'_') {
            self.expression()?
        } else {
            let n = self.number();
            self.add(Node::Number(n))
        };
        self.expect(b'_')?;
        let elem = self.type_()?;
        Some(self.add(Node::Vector(dim, elem)))
    }

    // <pointer-to-member-type> ::= M <class type> <member type>
    fn pointer_to_member_type(&mut self) -> P<Id> {
        self.expect(b'M')?;
        let class = self.type_()?;
        let member = self.type_()?;
        Some(self.add(Node::PtrMem(class, member)))
    }

    /// `_` → 0, `<number> _` → number + 1; -1 when malformed.
    fn compact_number(&mut self) -> i32 {
        let num = match self.peek() {
            b'_' => 0,
            b'n' => return -1,
            _ => self.number().saturating_add(1),
        };
        if num < 0 || !self.check(b'_') {
            return -1;
        }
        num
    }

    // <template-param> ::= T_ | T <number> _
    fn template_param(&mut self) -> P<Id> {
        self.expect(b'T')?;
        let n = self.compact_number();
        (n >= 0).then(|| self.add(Node::TemplateParam(n)))
    }

    // <template-args> ::= I <template-arg>+ E (J for a pack)
    fn template_args(&mut self) -> P<Id> {
        if !matches!(self.peek(), b'I' | b'J') {
            return None;
        }
        self.advance(1);
        self.template_args_1()
    }

    fn template_args_1(&mut self) -> P<Id> {
        // The arguments' names are no name a later constructor takes.
        let hold = self.last_name;
        if self.check(b'E') {
            return Some(self.add(Node::TemplateArgs(Vec::new())));
        }
        let mut args = Vec::new();
        loop {
            args.push(self.template_arg()?);
            if self.check(b'E') {
                break;
            }
        }
        self.last_name = hold;
        Some(self.add(Node::TemplateArgs(args)))
    }

    // <template-arg> ::= <type> | X <expression> E | <expr-primary> | J ... E
    fn template_arg(&mut self) -> P<Id> {
        match self.peek() {
            b'X' => {
                self.advance(1);
                let e = self.expression()?;
                self.expect(b'E')?;
                Some(e)
            }
            b'L' => self.expr_primary(),
            b'I' | b'J' => self.nested(Parser::template_args),
            _ => self.type_(),
        }
    }

    fn exprlist(&mut self, terminator: u8) -> P<Id> {
        let mut list = Vec::new();
        if !self.check(terminator) {
            loop {
                list.push(self.expression()?);
                if self.check(terminator) {
                    break;
                }
            }
        }
        Some(self.add(Node::ArgList(list)))
    }

    fn expression(&mut self) -> P<Id> {
        let was = self.is_expression;
        self.is_expression = true;
        let r = self.expression_1();
        self.is_expression = was;
        r
    }

    // <expression> (Itanium ABI §5.1.6).
    fn expression_1(&mut self) -> P<Id> {
        self.nested(Parser::expression_inner)
    }

    fn expression_inner(&mut self) -> P<Id> {
        let (peek, next) = (self.peek(), self.peek_next());
        match (peek, next) {
            (b'L', _) => self.expr_primary(),
            (b'T', _) => self.template_param(),
            (b's', b'r') => self.unresolved_name(),
            (b's', b'p') => {
                self.advance(2);
                let e = self.expression_1()?;
                Some(self.add(Node::PackExpansion(e)))
            }
            (b'f', b'p') => self.function_param(),
            (b'0'..=b'9', _) | (b'o', b'n') => self.name_expression(),
            (b'i' | b't', b'l') => self.init_list(),
            (b'u', _) => {
                self.advance(1);
                let name = self.source_name()?;
                let args = self.template_args_1()?;
                Some(self.add(Node::VendorExpr(name, args)))
            }
            _ => self.operator_expression(),
        }
    }

    // <unresolved-name> ::= sr <unresolved-type> <base-unresolved-name>
    //   | srN <type> <qualifier-level>+ E <base> | sr <qualifier-level>+ E <base>
    // The last form is ambiguous with the old `sr <type> <name>` (`sr1A1x`
    // now `sr1AE1x`): binutils tries the new reading first and, if the
    // whole name then fails, starts over with the old one.
    fn unresolved_name(&mut self) -> P<Id> {
        self.advance(2);
        let peek = self.peek();
        let new_syntax = self.unresolved_state != 0
            && (peek.is_ascii_digit()
                || peek.is_ascii_lowercase()
                || matches!(peek, b'C' | b'U' | b'L'));
        // binutils goes on without the scope when it does not parse.
        let ty = if new_syntax {
            self.unresolved_state = -1;
            let prefix = self.prefix(false);
            self.check(b'E');
            prefix
        } else {
            self.type_()
        };
        let mut name = self.unqualified_name(ty)?;
        if self.peek() == b'I' {
            let args = self.template_args()?;
            name = self.add(Node::Template(name, args));
        }
        Some(name)
    }

    // fp [<cv>] T | fp [<cv>] <number> _ (the qualifiers are not read, as in
    // binutils).
    fn function_param(&mut self) -> P<Id> {
        self.advance(2);
        let index = if self.check(b'T') {
            0
        } else {
            let n = self.compact_number();
            if n == i32::MAX || n == -1 {
                return None;
            }
            n + 1
        };
        Some(self.add(Node::FunctionParam(index)))
    }

    /// A dependent name used as an expression (`decltype(f(t))`).
    fn name_expression(&mut self) -> P<Id> {
        if self.peek() == b'o' {
            self.advance(2);
        }
        let name = self.unqualified_name(None)?;
        if self.peek() != b'I' {
            return Some(name);
        }
        let args = self.template_args()?;
        Some(self.add(Node::Template(name, args)))
    }

    // il <expression>* E | tl <type> <expression>* E
    fn init_list(&mut self) -> P<Id> {
        let typed = self.peek() == b't';
        self.advance(2);
        let ty = if typed { Some(self.type_()?) } else { None };
        if self.peek() == 0 || self.peek_next() == 0 {
            return None;
        }
        let list = self.exprlist(b'E')?;
        Some(self.add(Node::InitList(ty, list)))
    }

    fn operator_expression(&mut self) -> P<Id> {
        let op = self.operator_name()?;
        let (code, args) = match self.node(op) {
            Some(Node::Operator(info)) => (Some(info.code), info.args),
            Some(Node::ExtOperator(n, _)) => (None, *n),
            Some(Node::Cast(_)) => (None, 1),
            _ => return None,
        };
        if code == Some("st") {
            let ty = self.type_()?;
            return Some(self.add(Node::Unary(op, ty, false)));
        }
        match args {
            0 => Some(self.add(Node::Nullary(op))),
            1 => self.unary_expression(op, code),
            2 => self.binary_expression(op, code?),
            3 => self.trinary_expression(op, code?),
            _ => None,
        }
    }

    fn unary_expression(&mut self, op: Id, code: Option<&str>) -> P<Id> {
        // `pp_` / `mm_` are the prefix forms; without `_`, postfix.
        let suffix = matches!(code, Some("pp" | "mm")) && !self.check(b'_');
        let is_cast = matches!(self.node(op), Some(Node::Cast(_)));
        let operand = if is_cast && self.check(b'_') {
            self.exprlist(b'E')?
        } else if code == Some("sP") {
            self.template_args_1()?
        } else {
            self.expression_1()?
        };
        Some(self.add(Node::Unary(op, operand, suffix)))
    }

    fn binary_expression(&mut self, op: Id, code: &str) -> P<Id> {
        let left = if is_new_cast(code) {
            self.type_()?
        } else if code.starts_with('f') {
            self.operator_name()?
        } else if code == "di" {
            self.unqualified_name(None)?
        } else {
            self.expression_1()?
        };
        let right = if code == "cl" {
            self.exprlist(b'E')?
        } else if (code == "dt" || code == "pt")
            && matches!((self.peek(), self.peek_next()), (b'g', b's') | (b's', b'r'))
        {
            // A qualified member name.
            self.expression_1()?
        } else if code == "dt" || code == "pt" {
            let name = self.unqualified_name(None)?;
            if self.peek() == b'I' {
                let args = self.template_args()?;
                self.add(Node::Template(name, args))
            } else {
                name
            }
        } else {
            self.expression_1()?
        };
        Some(self.add(Node::Binary(op, left, right)))
    }

    fn trinary_expression(&mut self, op: Id, code: &str) -> P<Id> {
        let (first, second, third) = if code == "qu" || code == "dX" {
            let a = self.expression_1()?;
            let b = self.expression_1()?;
            (a, b, Some(self.expression_1()?))
        } else if code.starts_with('f') {
            let a = self.operator_name()?;
            let b = self.expression_1()?;
            (a, b, Some(self.expression_1()?))
        } else if code == "nw" || code == "na" {
            self.new_expression()?
        } else {
            return None;
        };
        Some(self.add(Node::Trinary(op, first, second, third)))
    }

    // nw <expression>* _ <type> [pi <expression>* | il ...] E
    fn new_expression(&mut self) -> P<(Id, Id, Option<Id>)> {
        let placement = self.exprlist(b'_')?;
        let ty = self.type_()?;
        let init = if self.check(b'E') {
            None
        } else if self.peek() == b'p' && self.peek_next() == b'i' {
            self.advance(2);
            Some(self.exprlist(b'E')?)
        } else if self.peek() == b'i' && self.peek_next() == b'l' {
            Some(self.expression_1()?)
        } else {
            return None;
        };
        Some((placement, ty, init))
    }

    // <expr-primary> ::= L <type> <value> E | L <mangled-name> E
    fn expr_primary(&mut self) -> P<Id> {
        self.expect(b'L')?;
        let ret = if matches!(self.peek(), b'_' | b'Z') {
            self.mangled_name(false)?
        } else {
            let ty = self.type_()?;
            if self.node(ty).is_some_and(ast::is_nullptr_type) && self.check(b'E') {
                return Some(ty);
            }
            let negative = self.check(b'n');
            let start = self.pos;
            while self.peek() != b'E' {
                if self.peek() == 0 {
                    return None;
                }
                self.advance(1);
            }
            let digits = self.s.get(start..self.pos).filter(|d| !d.is_empty())?;
            let value = self.add(Node::Name(digits));
            self.add(Node::Literal(ty, value, negative))
        };
        self.expect(b'E')?;
        Some(ret)
    }

    // <local-name> ::= Z <encoding> E <name> [<discriminator>]
    //                | Z <encoding> E s [<discriminator>]
    //                | Z <encoding> E d [<number>] _ <name>
    fn local_name(&mut self) -> P<Id> {
        self.expect(b'Z')?;
        let function = self.encoding(false)?;
        self.expect(b'E')?;
        let name = if self.check(b's') {
            self.discriminator()?;
            self.add(Node::Name(b"string literal"))
        } else {
            self.local_entity()?
        };
        // The enclosing function's return type would read as the entity's.
        if let Some(Node::Typed(_, ftype)) = self.node(function) {
            let ftype = *ftype;
            self.clear_return_type(ftype);
        }
        Some(self.add(Node::Local(function, name)))
    }

    fn local_entity(&mut self) -> P<Id> {
        let mut default_arg = None;
        if self.check(b'd') {
            let n = self.compact_number();
            if n < 0 {
                return None;
            }
            default_arg = Some(n);
        }
        let name = self.name()?;
        // Lambdas and unnamed types carry their own numbers.
        if !matches!(
            self.node(name),
            Some(Node::Lambda(..) | Node::UnnamedType(_))
        ) {
            self.discriminator()?;
        }
        Some(match default_arg {
            Some(n) => self.add(Node::DefaultArg(n, name)),
            None => name,
        })
    }

    // <discriminator> ::= _ <digit> | __ <number> _ (read, not printed)
    fn discriminator(&mut self) -> P<()> {
        if !self.check(b'_') {
            return Some(());
        }
        let long = self.check(b'_');
        let d = self.number();
        if d < 0 {
            return None;
        }
        if long && d >= 10 {
            self.expect(b'_')?;
        }
        Some(())
    }

    // <closure-type-name> ::= Ul <lambda-sig> E [<number>] _
    fn lambda(&mut self) -> P<Id> {
        self.advance(2);
        let params = self.parmlist()?;
        self.expect(b'E')?;
        let n = self.compact_number();
        (n >= 0).then(|| self.add(Node::Lambda(params, n)))
    }

    // <unnamed-type-name> ::= Ut [<number>] _ (a substitution candidate).
    fn unnamed_type(&mut self) -> P<Id> {
        self.advance(2);
        let n = self.compact_number();
        if n < 0 {
            return None;
        }
        let ret = self.add(Node::UnnamedType(n));
        self.add_sub(ret)?;
        Some(ret)
    }

    // <substitution> ::= S_ | S <seq-id> _ | St | Sa | Sb | Ss | Si | So | Sd
    fn substitution(&mut self) -> P<Id> {
        self.substitution_in(false)
    }

    /// A substitution; `prefix` when it starts a nested name's prefix,
    /// where binutils spells a standard abbreviation in full before a
    /// constructor or destructor (`std::basic_string<char, …>::basic_string()`)
    /// even without `DMGL_VERBOSE`.
    fn substitution_in(&mut self, prefix: bool) -> P<Id> {
        self.expect(b'S')?;
        let c = self.next_char();
        if c == b'_' || c.is_ascii_digit() || c.is_ascii_uppercase() {
            let index = self.seq_id(c)?;
            return self.subs.get(index).copied();
        }
        let verbose = self.verbose || (prefix && matches!(self.peek(), b'C' | b'D'));
        let (text, last) = ast::standard_sub(c, verbose)?;
        if let Some(last) = last {
            self.last_name = Some(self.add(Node::SubStd(last)));
        }
        let mut dc = self.add(Node::SubStd(text));
        if self.peek() == b'B' {
            // With ABI tags, the abbreviation becomes a candidate.
            dc = self.abi_tags(dc)?;
            self.add_sub(dc)?;
        }
        Some(dc)
    }

    /// The base-36 `<seq-id>` after `S`, starting with `c`, plus one (`S_` → 0).
    fn seq_id(&mut self, mut c: u8) -> P<usize> {
        if c == b'_' {
            return Some(0);
        }
        let mut id: u32 = 0;
        while c != b'_' {
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'A'..=b'Z' => c - b'A' + 10,
                _ => return None,
            };
            id = id.checked_mul(36)?.checked_add(u32::from(digit))?;
            c = self.next_char();
        }
        usize::try_from(id).ok()?.checked_add(1)
    }
}

fn is_clone_start(c: u8) -> bool {
    c.is_ascii_lowercase() || c == b'_' || c.is_ascii_digit()
}

fn is_new_cast(code: &str) -> bool {
    matches!(code, "sc" | "dc" | "cc" | "rc")
}

/// GCC names the anonymous namespace `_GLOBAL__N_1` (also with `.` or `$`).
fn anonymous_namespace(text: &[u8]) -> &[u8] {
    let anonymous = text.len() >= 10
        && text.starts_with(b"_GLOBAL_")
        && matches!(text.get(8), Some(b'.' | b'_' | b'$'))
        && text.get(9) == Some(&b'N');
    if anonymous {
        b"(anonymous namespace)"
    } else {
        text
    }
}
