package bincdc.test;

import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** {@code java -cp ... bincdc.test.Dump <table dir>}: the table as JSON lines, the first the
 * column names, then one array per row, every value as its Spark toString (null as null). */
public class Dump {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        FileTable t = new FileTable(dir.getName(), dir);
        StructType s = t.schema();
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        StringBuilder head = new StringBuilder("[");
        for (int i = 0; i < s.size(); i++) head.append(i > 0 ? "," : "").append(quote(s.fields()[i].name()));
        out.println(head.append("]"));
        for (byte[] b : FileTable.readRows(dir)) {
            UnsafeRow r = FileTable.toRow(b, s.size());
            StringBuilder line = new StringBuilder("[");
            for (int i = 0; i < s.size(); i++) {
                StructField f = s.fields()[i];
                line.append(i > 0 ? "," : "").append(r.isNullAt(i) ? "null" : quote(String.valueOf(r.get(i, f.dataType()))));
            }
            out.println(line.append("]"));
        }
    }

    static String quote(String v) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : v.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
