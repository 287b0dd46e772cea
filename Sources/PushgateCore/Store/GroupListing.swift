import Foundation

/// Listing a group's devices a page at a time, the same in every store: pages in device-id order (the
/// membership primary key), with the last device id as the cursor, so a listing is stable whatever is
/// registered meanwhile (new devices get higher ids). Each store keeps only the query.
package enum GroupListing {
    /// One membership row a store read: the device id, its token's storage key, its state code and when
    /// it was registered (milliseconds since 1970).
    package typealias Row = (id: Int64, token: String, state: Int64, registeredAt: Int64)

    /// The device id a page starts after (0 for the first page). Throws ``StoreError/Code/invalidArgument``
    /// for a limit below one or a cursor no store wrote.
    package static func start(after cursor: GroupCursor?, limit: Int) throws(StoreError) -> Int64 {
        _ = try StoreError.positive(limit)
        guard let cursor else { return 0 }
        guard let id = Int64(cursor.value), id >= 0 else {
            throw StoreError.invalidArgument("malformed group cursor \"\(cursor.value.prefix(32))\"")
        }
        return id
    }

    /// The page from the rows read after the start, ascending, at most `limit + 1`: the extra row only
    /// tells that another page follows.
    package static func page(rows: [Row], limit: Int) throws -> GroupPage {
        var members = [GroupMember]()
        members.reserveCapacity(min(rows.count, limit))
        for row in rows.prefix(limit) {
            members.append(
                GroupMember(
                    token: try StoredForm.deviceToken(row.token),
                    state: StoredForm.deviceState(row.state),
                    registeredAt: Date(timeIntervalSince1970: TimeInterval(row.registeredAt) / 1000)
                )
            )
        }
        let next = rows.count > limit ? GroupCursor(String(rows[limit - 1].id)) : nil
        return GroupPage(devices: members, next: next)
    }
}
