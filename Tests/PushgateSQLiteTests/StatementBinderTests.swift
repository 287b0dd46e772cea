import Foundation
import GRDB
import Testing

@testable import PushgateSQLite

/// The writer's hot statements bind their values one by one (``StatementBinder``) instead of through
/// `StatementArguments`: the same values must land, a wrong count must fail before anything runs, and a
/// cached statement must stay usable by either way of binding.
@Suite("SQLite: statements bound value by value")
struct StatementBinderTests {
    private func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a INTEGER, b TEXT, c BLOB, d INTEGER, e INTEGER NOT NULL)")
        }
        return queue
    }

    private static let insert = "INSERT INTO t (a, b, c, d, e) VALUES (?, ?, ?, ?, ?)"

    @Test("integers, text (empty and not ASCII), blobs, NULL and booleans land as execute(arguments:) writes them")
    func valuesLand() throws {
        let queue = try database()
        try queue.write { db in
            let statement = try db.cachedStatement(sql: Self.insert)
            try statement.bindAndExecute {
                $0.bind(Int64.max)
                $0.bind("čaj ☕︎")
                $0.bind(Data([0, 1, 2, 255]))
                $0.bind(Int64?.none)
                $0.bind(true)
            }
            try statement.bindAndExecute {
                $0.bind(-1)
                $0.bind("")
                $0.bind(Data?.none)
                $0.bind(Int64?.some(7))
                $0.bind(false)
            }
            // The same cached statement, bound the GRDB way in between and after: each way resets the other's.
            try statement.execute(arguments: [3, "x", nil, nil, 1])
            try statement.bindAndExecute {
                $0.bind(4)
                $0.bind("y")
                $0.bind(Data([9]))
                $0.bind(Int64?.none)
                $0.bind(0)
            }
        }
        let rows = try queue.read { db in try Row.fetchAll(db, sql: "SELECT a, b, c, d, e FROM t ORDER BY rowid") }
        #expect(rows.count == 4)
        #expect(rows[0][0] == Int64.max)
        #expect(rows[0][1] == "čaj ☕︎")
        #expect(rows[0][2] == Data([0, 1, 2, 255]))
        #expect(rows[0][3] == DatabaseValue.null)
        #expect(rows[0][4] == 1)
        #expect(rows[1][0] == -1)
        #expect(rows[1][1] == "")
        #expect(rows[1][2] == DatabaseValue.null)
        #expect(rows[1][3] == 7)
        #expect(rows[1][4] == 0)
        #expect(rows[2][1] == "x")
        #expect(rows[3][0] == 4)
        #expect(rows[3][2] == Data([9]))
    }

    @Test("a parameter left unbound, or one too many, fails before the statement runs")
    func wrongCounts() throws {
        let queue = try database()
        try queue.write { db in
            // SQLite itself would run this one with `b` NULL.
            #expect(throws: DatabaseError.self) {
                try db.cachedStatement(sql: "INSERT INTO t (a, b, e) VALUES (?, ?, 1)").bindAndExecute {
                    $0.bind(1)
                }
            }
            let statement = try db.cachedStatement(sql: Self.insert)
            #expect(throws: DatabaseError.self) {
                try statement.bindAndExecute {
                    for value in 1...6 { $0.bind(value) }
                }
            }
        }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 0)
    }

    @Test("a bound query reads rows, and binds anew on each use")
    func boundQuery() throws {
        let queue = try database()
        try queue.write { db in
            for value in 1...5 {
                try db.execute(sql: Self.insert, arguments: [value, "v\(value)", nil, nil, 0])
            }
        }
        try queue.read { db in
            let statement = try db.cachedStatement(sql: "SELECT b FROM t WHERE a > ? AND a <= ? ORDER BY a")
            let first = try String.fetchAll(
                statement.bound {
                    $0.bind(1)
                    $0.bind(3)
                }
            )
            #expect(first == ["v2", "v3"])
            let second = try String.fetchAll(
                statement.bound {
                    $0.bind(3)
                    $0.bind(5)
                }
            )
            #expect(second == ["v4", "v5"])
        }
    }
}
