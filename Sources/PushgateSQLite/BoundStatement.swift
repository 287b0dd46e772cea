import GRDB

/// Runs a cached statement with arguments bound one by one, each through its own type's
/// `StatementBinding`, for the statements the writer runs for every request and every chunk.
///
/// `execute(arguments:)` takes a `StatementArguments`: an array of existentials, each converted to a
/// `DatabaseValue`, checked against the statement and bound through nested closures. For the one-device
/// stream that was about a quarter of the writer's own (Swift) time, more than the binding itself
/// (`pushgate-bench ledger-write` under perf). Here a value of a concrete type binds itself; the statement
/// still runs through GRDB (`execute()`), so its transaction tracking, errors and traces are unchanged.
struct StatementBinder {
    let statement: Statement
    private var index: CInt = 0
    /// The first `sqlite3_bind_*` result that was not `SQLITE_OK` (0), and where.
    private var failure: (code: CInt, index: CInt)?

    fileprivate init(_ statement: Statement) {
        self.statement = statement
    }

    /// Binds the next parameter (`?` in order) to `value`; nil binds NULL.
    mutating func bind(_ value: some StatementBinding) {
        index += 1
        let code = value.bind(to: statement.sqliteStatement, at: index)
        if code != 0, failure == nil { failure = (code, index) }
    }

    /// Fails when a bind failed, or when the statement has a parameter left unbound: binding NULL one
    /// past the last is refused (`SQLITE_RANGE`) only when every parameter was bound.
    fileprivate func check() throws {
        if let failure {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: failure.code),
                message: "could not bind parameter \(failure.index)",
                sql: statement.sql
            )
        }
        if Int64?.none.bind(to: statement.sqliteStatement, at: index + 1) == 0 {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE,
                message: "\(index) parameters bound, the statement has more",
                sql: statement.sql
            )
        }
    }
}

extension Statement {
    /// The statement with its parameters bound by `bind` (every one, in order), ready to run or to fetch
    /// from (`Row.fetchCursor(statement)`, `Int64.fetchAll(statement)`: without arguments, which keeps
    /// these bindings).
    func bound(_ bind: (inout StatementBinder) -> Void) throws -> Statement {
        // Resets the statement, clears the previous bindings, and marks the (empty) arguments as bound,
        // so that running it resets without touching what `bind` binds.
        setUncheckedArguments(StatementArguments())
        var binder = StatementBinder(self)
        bind(&binder)
        try binder.check()
        return self
    }

    /// Binds the statement's parameters with `bind` (every one, in order) and runs it to its end.
    func bindAndExecute(_ bind: (inout StatementBinder) -> Void) throws {
        try bound(bind).execute()
    }
}
