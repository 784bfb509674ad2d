package bincdc.test;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException;
import org.apache.spark.sql.connector.catalog.CatalogV2Util;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A tiny MERGE-capable Spark catalog for tests only: every table is a directory under the
 * catalog option {@code path} holding its schema, properties and rows (UnsafeRow bytes). Tables
 * support batch reads, appends, overwrites, TRUNCATE and group-based row-level operations
 * (MERGE / UPDATE / DELETE rewrite the whole table: one group). Not for production: no
 * concurrency control beyond atomic file renames.
 */
public class MergeCatalog implements TableCatalog, SupportsNamespaces {
    private String name;
    private File root;

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.name = name;
        String path = options.get("path");
        if (path == null) {
            throw new IllegalArgumentException("spark.sql.catalog." + name + ".path is required");
        }
        root = new File(path);
        root.mkdirs();
    }

    @Override
    public String name() { return name; }

    private File nsDir(String[] ns) {
        File d = root;
        for (String p : ns) d = new File(d, p);
        return d;
    }

    private File tableDir(Identifier ident) {
        return new File(nsDir(ident.namespace()), ident.name());
    }

    @Override
    public Identifier[] listTables(String[] namespace) {
        List<Identifier> out = new ArrayList<>();
        File[] files = nsDir(namespace).listFiles();
        if (files != null) {
            for (File f : files) {
                if (new File(f, FileTable.SCHEMA).isFile()) out.add(Identifier.of(namespace, f.getName()));
            }
        }
        return out.toArray(new Identifier[0]);
    }

    @Override
    public Table loadTable(Identifier ident) throws NoSuchTableException {
        File dir = tableDir(ident);
        if (!new File(dir, FileTable.SCHEMA).isFile()) throw new NoSuchTableException(ident);
        return new FileTable(name + "." + ident.toString(), dir);
    }

    @Override
    public Table createTable(Identifier ident, Column[] columns, Transform[] partitions,
                             Map<String, String> properties) throws TableAlreadyExistsException {
        return createTable(ident, CatalogV2Util.v2ColumnsToStructType(columns), partitions, properties);
    }

    @Override
    public Table createTable(Identifier ident, StructType schema, Transform[] partitions,
                             Map<String, String> properties) throws TableAlreadyExistsException {
        File dir = tableDir(ident);
        if (new File(dir, FileTable.SCHEMA).isFile()) throw new TableAlreadyExistsException(ident);
        dir.mkdirs();
        FileTable.create(dir, schema, properties);
        return new FileTable(name + "." + ident.toString(), dir);
    }

    @Override
    public Table alterTable(Identifier ident, TableChange... changes) throws NoSuchTableException {
        FileTable t = (FileTable) loadTable(ident);
        StructType schema = t.schema();
        Map<String, String> props = new HashMap<>(t.properties());
        for (TableChange c : changes) {
            if (c instanceof TableChange.SetProperty) {
                TableChange.SetProperty s = (TableChange.SetProperty) c;
                props.put(s.property(), s.value());
            } else if (c instanceof TableChange.RemoveProperty) {
                props.remove(((TableChange.RemoveProperty) c).property());
            } else if (c instanceof TableChange.AddColumn) {
                TableChange.AddColumn a = (TableChange.AddColumn) c;
                if (a.fieldNames().length != 1) throw new UnsupportedOperationException("nested add column");
                if (!Arrays.asList(schema.fieldNames()).contains(a.fieldNames()[0])) {
                    if (t.rowCount() > 0) throw new UnsupportedOperationException("add column to a non-empty table");
                    schema = schema.add(new StructField(a.fieldNames()[0], a.dataType(), a.isNullable(),
                            org.apache.spark.sql.types.Metadata.empty()));
                }
            }
            // other changes (comments, nullability, positions) are accepted and ignored
        }
        t.rewriteMeta(schema, props);
        return loadTable(ident);
    }

    @Override
    public boolean dropTable(Identifier ident) {
        File dir = tableDir(ident);
        if (!dir.exists()) return false;
        deleteTree(dir);
        return true;
    }

    @Override
    public void renameTable(Identifier from, Identifier to) throws NoSuchTableException, TableAlreadyExistsException {
        File a = tableDir(from), b = tableDir(to);
        if (!a.exists()) throw new NoSuchTableException(from);
        if (b.exists()) throw new TableAlreadyExistsException(to);
        b.getParentFile().mkdirs();
        if (!a.renameTo(b)) throw new IllegalStateException("rename failed: " + a + " -> " + b);
    }

    static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) for (File k : kids) deleteTree(k);
        f.delete();
    }

    // --- namespaces: directories -----------------------------------------------------------

    @Override
    public String[][] listNamespaces() { return listNamespaces(new String[0]); }

    @Override
    public String[][] listNamespaces(String[] namespace) {
        List<String[]> out = new ArrayList<>();
        File[] files = nsDir(namespace).listFiles();
        if (files != null) {
            for (File f : files) {
                if (f.isDirectory() && !new File(f, FileTable.SCHEMA).isFile()) {
                    String[] ns = Arrays.copyOf(namespace, namespace.length + 1);
                    ns[namespace.length] = f.getName();
                    out.add(ns);
                }
            }
        }
        return out.toArray(new String[0][]);
    }

    @Override
    public boolean namespaceExists(String[] namespace) {
        return true;     // any namespace: its directory is made with its first table
    }

    @Override
    public Map<String, String> loadNamespaceMetadata(String[] namespace) throws NoSuchNamespaceException {
        if (!namespaceExists(namespace)) throw new NoSuchNamespaceException(namespace);
        return new HashMap<>();
    }

    @Override
    public void createNamespace(String[] namespace, Map<String, String> metadata) {
        nsDir(namespace).mkdirs();
    }

    @Override
    public void alterNamespace(String[] namespace, NamespaceChange... changes) { }

    @Override
    public boolean dropNamespace(String[] namespace, boolean cascade) {
        File d = nsDir(namespace);
        if (!d.exists()) return false;
        deleteTree(d);
        return true;
    }
}
