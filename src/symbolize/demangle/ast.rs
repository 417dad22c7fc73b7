//! The tree a mangled name is read into (Itanium C++ ABI §5.1), and the
//! tables of built-in types, operators and standard abbreviations.
//!
//! Nodes live in one arena (`Vec<Node>`) and refer to each other by index,
//! so a substitution (`S_`, `T_`) is a second reference to an existing node,
//! as in binutils' `cp-demangle.c`, whose printing rules depend on that
//! sharing. Names are byte slices of the mangled string.

/// Index of a node in the arena.
pub(super) type Id = usize;

/// How a literal of a built-in type is printed (`Li5E` → `5`, `Lj5E` → `5u`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum LitStyle {
    /// `(type)value`.
    Default,
    Int,
    Unsigned,
    Long,
    UnsignedLong,
    LongLong,
    UnsignedLongLong,
    /// `true` / `false`.
    Bool,
    /// `(type)[value]`.
    Float,
    /// A lone `void` parameter list is printed as `()`.
    Void,
}

/// A built-in type's printed name and literal style.
#[derive(Debug)]
pub(super) struct Builtin {
    pub name: &'static str,
    pub style: LitStyle,
}

/// An operator's mangled code, printed name and operand count.
#[derive(Debug)]
pub(super) struct OpInfo {
    pub code: &'static str,
    pub name: &'static str,
    pub args: u8,
}

/// Qualifiers of a type or of a member function's `this` (`*This`), and the
/// other function qualifiers (Itanium ABI §5.1.5.3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Qual {
    Restrict,
    Volatile,
    Const,
    RestrictThis,
    VolatileThis,
    ConstThis,
    RefThis,
    RvalueRefThis,
    TransactionSafe,
    Noexcept,
    ThrowSpec,
}

impl Qual {
    /// Qualifiers of a function type (binutils' `FNQUAL_COMPONENT_CASE`).
    pub(super) fn is_fnqual(self) -> bool {
        !matches!(self, Qual::Restrict | Qual::Volatile | Qual::Const)
    }

    /// Plain cv-qualifiers, which an array passes down to its element.
    pub(super) fn is_cv(self) -> bool {
        matches!(self, Qual::Restrict | Qual::Volatile | Qual::Const)
    }

    /// The `this` form of a plain cv-qualifier (before a function type).
    pub(super) fn on_this(self) -> Qual {
        match self {
            Qual::Restrict => Qual::RestrictThis,
            Qual::Volatile => Qual::VolatileThis,
            Qual::Const => Qual::ConstThis,
            other => other,
        }
    }
}

/// One piece of a demangled name.
#[derive(Debug, Clone)]
pub(super) enum Node<'a> {
    /// An identifier, or a fixed text such as `string literal`.
    Name(&'a [u8]),
    /// A standard abbreviation (`Sa` → `std::allocator`).
    SubStd(&'static str),
    Builtin(&'static Builtin),
    /// `_FloatN` / `_FloatNx` (`DF16_`).
    FloatN(i32, bool),
    /// `scope::name`.
    Qual(Id, Id),
    /// `function::entity`.
    Local(Id, Id),
    /// A function name and its type.
    Typed(Id, Id),
    /// `name[abi:tag]`.
    Tagged(Id, Id),
    /// `name<args>`; the second is a `TemplateArgs`.
    Template(Id, Id),
    TemplateParam(i32),
    FunctionParam(i32),
    Ctor(Id),
    Dtor(Id),
    /// A special name: fixed text, then the entity (`vtable for X`).
    Special(&'static str, Id),
    /// `construction vtable for A-in-B`.
    ConstructionVtable(Id, Id),
    /// `reference temporary #N for X` (name, number).
    RefTemp(Id, Id),
    /// A qualifier, what it applies to (filled in by the parser), and the
    /// operand of `noexcept(...)` / `throw(...)`.
    Qualifier(Qual, Option<Id>, Option<Id>),
    /// `type name` for a vendor qualifier `U name type`.
    VendorTypeQual(Id, Id),
    Pointer(Id),
    Reference(Id),
    RvalueRef(Id),
    Complex(Id),
    Imaginary(Id),
    VendorType(Id),
    /// Return type (none for plain functions) and parameter list.
    Function(Option<Id>, Option<Id>),
    /// Dimension and element type.
    Array(Option<Id>, Id),
    /// Class and member type.
    PtrMem(Id, Id),
    /// Dimension and element type of a `__vector`.
    Vector(Id, Id),
    /// Function parameters or expressions, printed with `, `.
    ArgList(Vec<Id>),
    /// Template arguments or an argument pack, printed with `, `.
    TemplateArgs(Vec<Id>),
    /// `type{list}`.
    InitList(Option<Id>, Id),
    Operator(&'static OpInfo),
    /// `operator name` for a vendor operator `v <digit> name`.
    ExtOperator(u8, Id),
    /// `cv type` inside an expression.
    Cast(Id),
    /// `cv type` naming a conversion operator.
    Conversion(Id),
    Nullary(Id),
    /// Operator, operand, and whether it is the postfix form (`pp`, `mm`).
    Unary(Id, Id, bool),
    Binary(Id, Id, Id),
    Trinary(Id, Id, Id, Option<Id>),
    /// Type, digits, negative.
    Literal(Id, Id, bool),
    Number(i32),
    Decltype(Id),
    PackExpansion(Id),
    /// `{default arg#N}::entity`.
    DefaultArg(i32, Id),
    /// `{lambda(params)#N}`.
    Lambda(Id, i32),
    /// `{unnamed type#N}`.
    UnnamedType(i32),
    /// `encoding [clone suffix]`.
    Clone(Id, Id),
    /// `name(args)` for a vendor expression `u name args E`.
    VendorExpr(Id, Id),
    /// `[a, b]`.
    StructuredBinding(Id),
    /// A C++20 module name: the enclosing module name, the name, and
    /// whether it is a partition (`foo.bar`, `foo:bar`).
    Module(Option<Id>, Id, bool),
    /// `entity@module`.
    ModuleEntity(Id, Id),
}

const fn b(name: &'static str, style: LitStyle) -> Builtin {
    Builtin { name, style }
}

/// Built-in types by their one-letter code, `a` to `z` (`None` where the
/// letter is no built-in type).
pub(super) fn builtin_letter(c: u8) -> Option<&'static Builtin> {
    use LitStyle as S;
    static T: [Builtin; 21] = [
        b("signed char", S::Default),
        b("bool", S::Bool),
        b("char", S::Default),
        b("double", S::Float),
        b("long double", S::Float),
        b("float", S::Float),
        b("__float128", S::Float),
        b("unsigned char", S::Default),
        b("int", S::Int),
        b("unsigned int", S::Unsigned),
        b("long", S::Long),
        b("unsigned long", S::UnsignedLong),
        b("__int128", S::Default),
        b("unsigned __int128", S::Default),
        b("short", S::Default),
        b("unsigned short", S::Default),
        b("void", S::Void),
        b("wchar_t", S::Default),
        b("long long", S::LongLong),
        b("unsigned long long", S::UnsignedLongLong),
        b("...", S::Default),
    ];
    let i = match c {
        b'a'..=b'j' => c - b'a',
        b'l'..=b'o' => c - b'l' + 10,
        b's' | b't' => c - b's' + 14,
        b'v'..=b'z' => c - b'v' + 16,
        _ => return None,
    };
    T.get(usize::from(i))
}

/// Built-in types written `D<letter>`.
pub(super) fn builtin_d(c: u8) -> Option<&'static Builtin> {
    use LitStyle as S;
    static DECIMAL32: Builtin = b("decimal32", S::Default);
    static DECIMAL64: Builtin = b("decimal64", S::Default);
    static DECIMAL128: Builtin = b("decimal128", S::Default);
    static HALF: Builtin = b("half", S::Float);
    static CHAR8: Builtin = b("char8_t", S::Default);
    static CHAR16: Builtin = b("char16_t", S::Default);
    static CHAR32: Builtin = b("char32_t", S::Default);
    static NULLPTR: Builtin = b("decltype(nullptr)", S::Default);
    Some(match c {
        b'f' => &DECIMAL32,
        b'd' => &DECIMAL64,
        b'e' => &DECIMAL128,
        b'h' => &HALF,
        b'u' => &CHAR8,
        b's' => &CHAR16,
        b'i' => &CHAR32,
        b'n' => &NULLPTR,
        _ => return None,
    })
}

/// `DF16b`.
pub(super) static BFLOAT16: Builtin = b("std::bfloat16_t", LitStyle::Float);

/// Whether `node` is the built-in `decltype(nullptr)`.
pub(super) fn is_nullptr_type(node: &Node<'_>) -> bool {
    matches!(node, Node::Builtin(t) if t.name == "decltype(nullptr)")
}

const fn op(code: &'static str, name: &'static str, args: u8) -> OpInfo {
    OpInfo { code, name, args }
}

/// Operators by their two-letter code (Itanium ABI §5.1.3), with binutils' spelling.
static OPERATORS: [OpInfo; 68] = [
    op("aN", "&=", 2),
    op("aS", "=", 2),
    op("aa", "&&", 2),
    op("ad", "&", 1),
    op("an", "&", 2),
    op("at", "alignof ", 1),
    op("aw", "co_await ", 1),
    op("az", "alignof ", 1),
    op("cc", "const_cast", 2),
    op("cl", "()", 2),
    op("cm", ",", 2),
    op("co", "~", 1),
    op("dV", "/=", 2),
    op("dX", "[...]=", 3),
    op("da", "delete[] ", 1),
    op("dc", "dynamic_cast", 2),
    op("de", "*", 1),
    op("di", "=", 2),
    op("dl", "delete ", 1),
    op("ds", ".*", 2),
    op("dt", ".", 2),
    op("dv", "/", 2),
    op("dx", "]=", 2),
    op("eO", "^=", 2),
    op("eo", "^", 2),
    op("eq", "==", 2),
    op("fL", "...", 3),
    op("fR", "...", 3),
    op("fl", "...", 2),
    op("fr", "...", 2),
    op("ge", ">=", 2),
    op("gs", "::", 1),
    op("gt", ">", 2),
    op("ix", "[]", 2),
    op("lS", "<<=", 2),
    op("le", "<=", 2),
    op("li", "operator\"\" ", 1),
    op("ls", "<<", 2),
    op("lt", "<", 2),
    op("mI", "-=", 2),
    op("mL", "*=", 2),
    op("mi", "-", 2),
    op("ml", "*", 2),
    op("mm", "--", 1),
    op("na", "new[]", 3),
    op("ne", "!=", 2),
    op("ng", "-", 1),
    op("nt", "!", 1),
    op("nw", "new", 3),
    op("oR", "|=", 2),
    op("oo", "||", 2),
    op("or", "|", 2),
    op("pL", "+=", 2),
    op("pl", "+", 2),
    op("pm", "->*", 2),
    op("pp", "++", 1),
    op("ps", "+", 1),
    op("pt", "->", 2),
    op("qu", "?", 3),
    op("rM", "%=", 2),
    op("rS", ">>=", 2),
    op("rc", "reinterpret_cast", 2),
    op("rm", "%", 2),
    op("rs", ">>", 2),
    op("sP", "sizeof...", 1),
    op("sZ", "sizeof...", 1),
    op("sc", "static_cast", 2),
    op("ss", "<=>", 2),
];

/// The last operators, kept apart so the table above stays one screen.
static MORE_OPERATORS: [OpInfo; 4] = [
    op("st", "sizeof ", 1),
    op("sz", "sizeof ", 1),
    op("tr", "throw", 0),
    op("tw", "throw ", 1),
];

/// The operator whose code is `c1 c2`.
pub(super) fn operator(c1: u8, c2: u8) -> Option<&'static OpInfo> {
    OPERATORS
        .iter()
        .chain(MORE_OPERATORS.iter())
        .find(|o| o.code.as_bytes() == [c1, c2])
}

/// A standard abbreviation (`S<letter>`): the text binutils prints for it
/// (in full when `verbose`, as `c++filt` asks; `std::string` and the like
/// otherwise, as gprof and `nm -C` ask) and the name a constructor or
/// destructor of it takes.
pub(super) fn standard_sub(c: u8, verbose: bool) -> Option<(&'static str, Option<&'static str>)> {
    let (simple, full, last) = match c {
        b't' => ("std", "std", None),
        b'a' => ("std::allocator", "std::allocator", Some("allocator")),
        b'b' => (
            "std::basic_string",
            "std::basic_string",
            Some("basic_string"),
        ),
        b's' => (
            "std::string",
            "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
            Some("basic_string"),
        ),
        b'i' => (
            "std::istream",
            "std::basic_istream<char, std::char_traits<char> >",
            Some("basic_istream"),
        ),
        b'o' => (
            "std::ostream",
            "std::basic_ostream<char, std::char_traits<char> >",
            Some("basic_ostream"),
        ),
        b'd' => (
            "std::iostream",
            "std::basic_iostream<char, std::char_traits<char> >",
            Some("basic_iostream"),
        ),
        _ => return None,
    };
    Some((if verbose { full } else { simple }, last))
}
