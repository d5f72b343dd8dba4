-- Enrichment as a batch join: every bid with its auction's row of the auctions file.
SELECT b.auction, b.bidder, b.price, b.date_time, a.seller, a.category
FROM ${bids} b JOIN ${auctions} a ON b.auction = a.id
