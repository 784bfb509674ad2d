package bincdc.test;

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.*;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.connector.catalog.*;
import org.apache.spark.sql.connector.read.*;
import org.apache.spark.sql.connector.write.*;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.Platform;

/** A table of {@link MergeCatalog}: rows as UnsafeRow bytes in {@code data.bin}. */
public class FileTable implements SupportsRead, SupportsWrite, SupportsRowLevelOperations, TruncatableTable {
    static final String SCHEMA = "schema.json", PROPS = "table.properties", DATA = "data.bin";
    private final String name;
    private final File dir;
    private final StructType schema;
    private final Map<String, String> props;

    FileTable(String name, File dir) {
        this.name = name;
        this.dir = dir;
        try {
            this.schema = (StructType) DataType.fromJson(
                    new String(Files.readAllBytes(new File(dir, SCHEMA).toPath()), StandardCharsets.UTF_8));
            Properties p = new Properties();
            try (InputStream in = new FileInputStream(new File(dir, PROPS))) { p.load(in); }
            Map<String, String> m = new HashMap<>();
            for (String k : p.stringPropertyNames()) m.put(k, p.getProperty(k));
            this.props = m;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void create(File dir, StructType schema, Map<String, String> props) {
        writeMeta(dir, schema, props);
        writeRows(dir, new ArrayList<>());
    }

    static void writeMeta(File dir, StructType schema, Map<String, String> props) {
        try {
            atomicWrite(new File(dir, SCHEMA), schema.json().getBytes(StandardCharsets.UTF_8));
            Properties p = new Properties();
            for (Map.Entry<String, String> e : props.entrySet()) if (e.getValue() != null) p.setProperty(e.getKey(), e.getValue());
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            p.store(b, null);
            atomicWrite(new File(dir, PROPS), b.toByteArray());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    void rewriteMeta(StructType newSchema, Map<String, String> newProps) { writeMeta(dir, newSchema, newProps); }

    static void atomicWrite(File f, byte[] bytes) throws IOException {
        File tmp = new File(f.getPath() + ".tmp");
        Files.write(tmp.toPath(), bytes);
        Files.move(tmp.toPath(), f.toPath(), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /** Every row's UnsafeRow bytes. */
    static List<byte[]> readRows(File dir) {
        List<byte[]> out = new ArrayList<>();
        File f = new File(dir, DATA);
        if (!f.isFile()) return out;
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(f)))) {
            int n = in.readInt();
            for (int i = 0; i < n; i++) {
                byte[] b = new byte[in.readInt()];
                in.readFully(b);
                out.add(b);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }

    static synchronized void writeRows(File dir, List<byte[]> rows) {
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(bytes);
            out.writeInt(rows.size());
            for (byte[] r : rows) { out.writeInt(r.length); out.write(r); }
            out.flush();
            atomicWrite(new File(dir, DATA), bytes.toByteArray());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static UnsafeRow toRow(byte[] b, int numFields) {
        UnsafeRow r = new UnsafeRow(numFields);
        r.pointTo(b, Platform.BYTE_ARRAY_OFFSET, b.length);
        return r;
    }

    int rowCount() { return readRows(dir).size(); }

    @Override public String name() { return name; }
    @Override public StructType schema() { return schema; }
    @Override public Column[] columns() { return CatalogV2Util.structTypeToV2Columns(schema, false); }
    @Override public Map<String, String> properties() { return props; }

    @Override
    public Set<TableCapability> capabilities() {
        return new HashSet<>(Arrays.asList(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE,
                TableCapability.TRUNCATE, TableCapability.OVERWRITE_DYNAMIC));
    }

    @Override
    public boolean truncateTable() { writeRows(dir, new ArrayList<>()); return true; }

    // --- reads: one partition holding every row ---------------------------------------------

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) { return new AllRowsScan(dir, schema); }

    static class AllRowsScan implements ScanBuilder, Scan, Batch {
        final File dir; final StructType schema;
        AllRowsScan(File dir, StructType schema) { this.dir = dir; this.schema = schema; }
        @Override public Scan build() { return this; }
        @Override public StructType readSchema() { return schema; }
        @Override public Batch toBatch() { return this; }
        @Override public InputPartition[] planInputPartitions() {
            return new InputPartition[] {new RowsPartition(readRows(dir), schema.size())};
        }
        @Override public PartitionReaderFactory createReaderFactory() { return new RowsReaderFactory(); }
    }

    static class RowsPartition implements InputPartition {
        final ArrayList<byte[]> rows; final int numFields;
        RowsPartition(List<byte[]> rows, int numFields) { this.rows = new ArrayList<>(rows); this.numFields = numFields; }
    }

    static class RowsReaderFactory implements PartitionReaderFactory {
        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            RowsPartition p = (RowsPartition) partition;
            return new PartitionReader<InternalRow>() {
                int i = -1;
                @Override public boolean next() { return ++i < p.rows.size(); }
                @Override public InternalRow get() { return toRow(p.rows.get(i), p.numFields); }
                @Override public void close() { }
            };
        }
    }

    // --- writes -------------------------------------------------------------------------------

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) { return new Builder(dir, info.schema(), false); }

    /** replace: the commit replaces every row (truncate, overwrite, and a row-level rewrite). */
    static class Builder implements WriteBuilder, SupportsTruncate, SupportsDynamicOverwrite, Write {
        final File dir; final StructType schema; boolean replace;
        Builder(File dir, StructType schema, boolean replace) { this.dir = dir; this.schema = schema; this.replace = replace; }
        @Override public WriteBuilder truncate() { replace = true; return this; }
        @Override public WriteBuilder overwriteDynamicPartitions() { replace = true; return this; }
        @Override public Write build() { return this; }
        @Override public BatchWrite toBatch() {
            return new BatchWrite() {
                @Override public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
                    return new RowsWriterFactory(schema);
                }
                @Override public boolean useCommitCoordinator() { return false; }
                @Override public void commit(WriterCommitMessage[] messages) {
                    synchronized (FileTable.class) {
                        List<byte[]> rows = replace ? new ArrayList<>() : readRows(dir);
                        for (WriterCommitMessage m : messages) if (m != null) rows.addAll(((Rows) m).rows);
                        writeRows(dir, rows);
                    }
                }
                @Override public void abort(WriterCommitMessage[] messages) { }
            };
        }
    }

    static class Rows implements WriterCommitMessage {
        final ArrayList<byte[]> rows = new ArrayList<>();
    }

    static class RowsWriterFactory implements DataWriterFactory {
        final StructType schema;
        RowsWriterFactory(StructType schema) { this.schema = schema; }
        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            UnsafeProjection proj = UnsafeProjection.create(schema);
            Rows out = new Rows();
            return new DataWriter<InternalRow>() {
                @Override public void write(InternalRow row) { out.rows.add(proj.apply(row).getBytes()); }
                @Override public WriterCommitMessage commit() { return out; }
                @Override public void abort() { }
                @Override public void close() { }
            };
        }
    }

    // --- row-level operations: group-based, the whole table is one group ------------------

    @Override
    public RowLevelOperationBuilder newRowLevelOperationBuilder(RowLevelOperationInfo info) {
        return () -> new RowLevelOperation() {
            @Override public Command command() { return info.command(); }
            @Override public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) { return new AllRowsScan(dir, schema); }
            @Override public WriteBuilder newWriteBuilder(LogicalWriteInfo w) { return new Builder(dir, w.schema(), true); }
        };
    }
}
